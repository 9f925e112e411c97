"""The low and high event time of an Iceberg commit's data files, from their column
statistics (``lower_bounds`` / ``upper_bounds`` of the sink's ``event_time_column``).

The column must be a top-level or nested timestamp (``timestamp``, ``timestamptz``, their
nanosecond forms), ``date`` or ``long`` (epoch milliseconds) field: :func:`event_time_field`
refuses anything else when the sink starts. The values become epoch milliseconds, the
low one rounded down and the high one rounded up (a date is its day's first
millisecond), so every row of the files lies in the range. A file that holds only
nulls of the column adds nothing; a file without bounds for it (metrics mode ``none``
or ``counts``, a file written elsewhere) makes the whole range unknown: None.
"""

from __future__ import annotations

from collections.abc import Iterable

from stream_sink.exceptions import InvalidOptionError, ValidationError
from stream_sink.table.conversions import from_bytes
from stream_sink.table.manifest import DataFile
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    DateType,
    IcebergType,
    LongType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
)

from ..source_position import EventTimeRange, span

MS_PER_DAY = 86_400_000
EVENT_TIME_TYPES = (
    TimestampType,
    TimestamptzType,
    TimestampNanoType,
    TimestamptzNanoType,
    DateType,
    LongType,
)


def event_time_field(schema: Schema, column: str, *, table: str) -> int:
    """The field id of ``column``; InvalidOptionError naming it when it is absent or not a
    timestamp, date or long."""
    try:
        field = schema.find_field(column)
    except ValidationError:
        raise InvalidOptionError(
            f"event_time_column={column!r}: table {table} has no such column "
            f"(its columns: {', '.join(schema.column_names)})"
        ) from None
    if not isinstance(field.field_type, EVENT_TIME_TYPES):
        raise InvalidOptionError(
            f"event_time_column={column!r}: column {column!r} of table {table} is "
            f"{field.field_type}; an event time is a timestamp, a date or a long of epoch "
            "milliseconds"
        )
    return field.field_id


def to_ms(t: IcebergType, value: int, *, upper: bool) -> int:
    """An Iceberg value of ``t`` as epoch ms (down for the low bound, up for the high)."""
    if isinstance(t, DateType):
        return value * MS_PER_DAY
    if isinstance(t, LongType):
        return value
    per_ms = 1_000_000 if isinstance(t, (TimestampNanoType, TimestamptzNanoType)) else 1000
    return -((-value) // per_ms) if upper else value // per_ms


def file_range(f: DataFile, field_id: int, t: IcebergType) -> EventTimeRange | None:
    """The range of one file; None when its statistics do not say."""
    low = (f.lower_bounds or {}).get(field_id)
    high = (f.upper_bounds or {}).get(field_id)
    if low is None or high is None:
        return None
    return (to_ms(t, from_bytes(t, low), upper=False), to_ms(t, from_bytes(t, high), upper=True))


def event_time_range(
    files: Iterable[DataFile], schema: Schema, column: str
) -> EventTimeRange | None:
    """The range of ``column`` over the data files ``files`` (delete files and files of
    nulls only aside); None when it is not known (module docstring) or no file has one."""
    try:
        field = schema.find_field(column)
    except ValidationError:
        return None  # dropped since the sink started: nothing to record
    if not isinstance(field.field_type, EVENT_TIME_TYPES):
        return None
    ranges: list[EventTimeRange | None] = []
    for f in files:
        if f.is_delete:
            continue
        nulls = (f.null_value_counts or {}).get(field.field_id)
        if nulls is not None and nulls == f.record_count:
            continue
        ranges.append(file_range(f, field.field_id, field.field_type))
    return span(ranges)
