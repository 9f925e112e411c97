"""The low and high event time of a Delta commit's data files, from the ``stats`` of their
add actions (``minValues`` / ``maxValues`` of the sink's ``event_time_column``).

The column must be a top-level timestamp (with or without a time zone), date or long
(epoch milliseconds) column: :func:`check_event_time_column` refuses anything else when
the sink starts. Delta's statistics hold timestamps in milliseconds (this writer rounds
the minimum down and the maximum up, so the range holds every row); a timestamp without
a zone is read as UTC, a date as its day's first millisecond. An add without a value for
the column (no ``stats``, or a column left out of them) makes the range unknown unless
its ``nullCount`` says every row is null there; an add that re-adds a table file under a
new deletion vector adds no rows and is left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timezone
from typing import Any

import pyarrow as pa

from stream_sink.delta.actions import AddFile
from stream_sink.delta.stats import parse_stats
from stream_sink.exceptions import InvalidOptionError

from ..source_position import EventTimeRange, span

MS_PER_DAY = 86_400_000


def is_event_time_type(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_int64(t)


def check_event_time_column(schema: pa.Schema, column: str, *, table: str) -> None:
    """InvalidOptionError naming ``column`` when it is absent or not a timestamp, date or
    long."""
    if column not in schema.names:
        raise InvalidOptionError(
            f"event_time_column={column!r}: Delta table {table} has no such top-level column "
            f"(its columns: {', '.join(schema.names)})"
        )
    t = schema.field(column).type
    if not is_event_time_type(t):
        raise InvalidOptionError(
            f"event_time_column={column!r}: column {column!r} of Delta table {table} is {t}; "
            "an event time is a timestamp, a date or a long of epoch milliseconds"
        )


def stat_ms(value: Any) -> int | None:
    """A ``minValues`` / ``maxValues`` entry as epoch ms; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if len(text) == 10:
            return (date.fromisoformat(text) - date(1970, 1, 1)).days * MS_PER_DAY
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    delta = parsed - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def add_range(add: AddFile, physical: str) -> EventTimeRange | None:
    """The range one add's stats give; None when they do not say."""
    doc = parse_stats(add.stats)
    if doc is None:
        return None
    low = stat_ms((doc.get("minValues") or {}).get(physical))
    high = stat_ms((doc.get("maxValues") or {}).get(physical))
    return None if low is None or high is None else (low, high)


def event_time_range(adds: Iterable[AddFile], physical: str) -> EventTimeRange | None:
    """The range of column ``physical`` (its name in files and stats) over the new data
    files among ``adds``; None when not known (module docstring) or no file has one."""
    ranges: list[EventTimeRange | None] = []
    for add in adds:
        if add.deletion_vector is not None:
            continue
        doc = parse_stats(add.stats) or {}
        nulls, rows = (doc.get("nullCount") or {}).get(physical), doc.get("numRecords")
        if isinstance(nulls, int) and nulls == rows:
            continue
        ranges.append(add_range(add, physical))
    return span(ranges)
