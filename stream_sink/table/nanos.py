"""Nanosecond timestamps (``timestamp_ns``, ``timestamptz_ns``) as ISO-8601 text.

Python's ``datetime`` stops at microseconds, so these values are handled as int
nanoseconds since 1970-01-01 00:00 UTC (their internal form) and parsed and printed
here with up to nine fraction digits.

Invariants:
- ``parse_nanos(format_nanos(v, z), z) == v`` for every int ``v`` in the range of a
  ``datetime`` (years 1..9999).
- A text with an offset is refused for a column without zone, and a column with zone
  needs one (the spec's JSON single-value form); ``naive_is_utc`` relaxes the latter
  for filter literals, where a naive text means UTC.
"""

from __future__ import annotations

import datetime as dt
import re

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_FRACTION = re.compile(r"^(?P<head>.*T\d{2}:\d{2}(:\d{2})?)(\.(?P<frac>\d{1,9}))?(?P<tail>.*)$")
NANOS_PER_SECOND = 1_000_000_000


def parse_nanos(text: str, with_zone: bool, naive_is_utc: bool = False) -> int:
    """Nanoseconds since the epoch of an ISO-8601 timestamp; ValueError when it is not one."""
    s = text.strip().replace(" ", "T", 1)
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    if "T" not in s:
        s += "T00:00:00"
    m = _FRACTION.match(s)
    if m is None:
        raise ValueError(f"{text!r} is not an ISO-8601 timestamp")
    value = dt.datetime.fromisoformat(m["head"] + m["tail"])
    if value.tzinfo is None:
        if with_zone and not naive_is_utc:
            raise ValueError("a timestamptz_ns value needs an offset")
        value = value.replace(tzinfo=dt.timezone.utc)
    elif not with_zone:
        raise ValueError("a timestamp_ns value has no offset")
    frac = int((m["frac"] or "").ljust(9, "0") or 0)
    return datetime_nanos(value) + frac


def datetime_nanos(value: dt.datetime) -> int:
    """Nanoseconds since the epoch of ``value`` (naive: taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    delta = value - _EPOCH
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1000


def format_nanos(nanos: int, with_zone: bool) -> str:
    """The spec's JSON single-value text of ``nanos``: nine fraction digits, and
    ``+00:00`` for a column with zone."""
    seconds, frac = divmod(int(nanos), NANOS_PER_SECOND)
    value = _EPOCH + dt.timedelta(seconds=seconds)
    text = value.replace(tzinfo=None).isoformat(timespec="seconds") + f".{frac:09d}"
    return text + "+00:00" if with_zone else text
