"""Where a sink's stream is, and which table version is complete up to an event time,
read back from the table itself (either format).

``sink_position(table, sink_id)`` is the :class:`~stream_sink.commit.source_position.SourcePosition`
the sink's last commit recorded: the job (Spark query id) and batch, each source's end
offsets and the event-time watermark, and the Iceberg snapshot id or Delta version that
recorded them. ``complete_up_to(table, sink_id, t)`` is the oldest table version whose
commit by the sink recorded an event-time watermark at or above ``t`` (epoch
milliseconds or a ``datetime``): every row the query will ever write with an event time
below ``t`` is in that version and every later one, as far as the query's watermark
promises it (rows later than the watermark are what Spark's stateful operators drop).

A routed sink's tables each record it under the operator id ``<sink id>=<table>``;
``sink_id`` may be either that or the routed sink's id.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from stream_sink.commit.delta import source_position as delta_position
from stream_sink.commit.iceberg import source_position as iceberg_position
from stream_sink.commit.source_position import SourcePosition
from stream_sink.delta import DeltaTable
from stream_sink.exceptions import InvalidOptionError
from stream_sink.table.snapshots import MAIN_BRANCH
from stream_sink.table.table import Table

__all__ = [
    "SourcePosition",
    "complete_up_to",
    "event_time_ms",
    "iso_time",
    "parse_event_time",
    "position_rows",
    "sink_position",
    "sink_positions",
]


def sink_position(
    table: Table | DeltaTable, sink_id: str, branch: str = MAIN_BRANCH
) -> SourcePosition | None:
    """The position ``sink_id`` last recorded in ``table`` (refreshed); None if none."""
    if isinstance(table, DeltaTable):
        table = table.refresh()
        return delta_position.sink_position(table.log, sink_id, table.snapshot)
    metadata = table.refresh().metadata
    found = iceberg_position.sink_position(metadata, sink_id, branch)
    if found is None and "=" not in sink_id:
        found = iceberg_position.sink_position(metadata, f"{sink_id}={table.name}", branch)
    return found


def sink_positions(table: Table | DeltaTable) -> list[SourcePosition]:
    """The position of every sink that recorded one in ``table`` (main), by sink id."""
    if isinstance(table, DeltaTable):
        table = table.refresh()
        return delta_position.sink_positions(table.log, table.snapshot)
    return iceberg_position.sink_positions(table.refresh().metadata)


def complete_up_to(
    table: Table | DeltaTable, sink_id: str, t: int | datetime, branch: str = MAIN_BRANCH
) -> SourcePosition | None:
    """The oldest version complete up to event time ``t`` (see module); None when no
    version known is (yet)."""
    ms = event_time_ms(t)
    if isinstance(table, DeltaTable):
        table = table.refresh()
        return delta_position.complete_up_to(table.log, sink_id, ms, table.snapshot)
    metadata = table.refresh().metadata
    found = iceberg_position.complete_up_to(metadata, sink_id, ms, branch)
    if found is None and "=" not in sink_id:
        routed = f"{sink_id}={table.name}"
        found = iceberg_position.complete_up_to(metadata, routed, ms, branch)
    return found


def event_time_ms(t: int | datetime) -> int:
    """Epoch milliseconds of ``t`` (a naive datetime is UTC)."""
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        return int(t.timestamp() * 1000)
    return int(t)


def parse_event_time(text: str, *, option: str = "--complete-up-to") -> int:
    """Epoch milliseconds of ``text``: an integer (epoch ms) or an ISO-8601 time
    (``2024-05-02T12:00:00Z``, ``2024-05-02 12:00:00+02:00``, ``2024-05-02``; without
    an offset it is UTC). InvalidOptionError naming ``option`` otherwise."""
    value = str(text).strip()
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    try:
        utc = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        parsed = datetime.fromisoformat(utc)
    except ValueError:
        raise InvalidOptionError(
            f"{option} {text!r}: expected an event time as ISO-8601 "
            "(2024-05-02T12:00:00Z; UTC without an offset) or epoch milliseconds "
            "(1714651200000)"
        ) from None
    return event_time_ms(parsed)


def iso_time(ms: int | None) -> str | None:
    """``ms`` (epoch milliseconds) as an ISO-8601 UTC time; None for None."""
    if ms is None:
        return None
    text = datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def _event_times(p: SourcePosition) -> str | None:
    low, high = p.event_time_low_ms, p.event_time_high_ms
    return None if low is None or high is None else f"{iso_time(low)}..{iso_time(high)}"


def position_rows(table: Table | DeltaTable) -> list[dict[str, object]]:
    """Each sink's recorded position as ``table show`` lists it (one row a sink)."""
    return [
        {
            "sink": p.sink_id,
            "resume_from_table": p.point,
            "source_offsets": p.offsets_json or "unknown",
            "event_time_watermark_ms": p.event_time_watermark_ms,
            "event_time_watermark": iso_time(p.event_time_watermark_ms),
            "event_times": _event_times(p),
            "version": p.version,
        }
        for p in sink_positions(table)
    ]
