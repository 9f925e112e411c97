"""Skipping Parquet row groups by their column statistics (min, max, null count).

The same question as :func:`stream_sink.read.evaluators.file_might_match`, asked of one
row group of an open file: "might any row match the residual filter?".

Invariants:
- ``False`` only when no row of the row group can match; the residual filter still
  decides row by row in the row groups that are read.
- Conservative: statistics are used only for top-level columns of types whose
  Parquet statistics convert exactly to internal values (int, long, float, double,
  string, date, timestamp[tz] in s/ms/us); a column without statistics, without
  min/max, with NaN bounds or of any other type never prunes a row group.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.read.binding import BoundPredicate, might_match
from stream_sink.read.evaluators import range_might_match
from stream_sink.read.expressions import AlwaysTrue, Expression
from stream_sink.read.literals import is_nan
from stream_sink.table.types import (
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

_EXACT = (IntegerType, LongType, FloatType, DoubleType, StringType)
_UNIT_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}
_EPOCH = dt.date(1970, 1, 1)


class RowGroupFilter:
    """Decides per row group of one file whether the residual ``expr`` might match.

    ``columns`` maps a field id to the file's top-level Arrow field holding it.
    """

    def __init__(self, expr: Expression, meta: pq.FileMetaData, columns: Mapping[int, pa.Field]):
        self._expr = expr
        self._meta = meta
        paths = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
        self._columns = {
            fid: (paths[f.name], f.type) for fid, f in columns.items() if f.name in paths
        }

    @property
    def useful(self) -> bool:
        return not isinstance(self._expr, AlwaysTrue) and bool(self._columns)

    def might_match(self, row_group: int) -> bool:
        rg = self._meta.row_group(row_group)
        return might_match(self._expr, lambda p: self._leaf(p, rg))

    def _leaf(self, p: BoundPredicate, rg: pq.RowGroupMetaData) -> bool:
        found = self._columns.get(p.field_id)
        if found is None:
            return True
        index, arrow_type = found
        stats = rg.column(index).statistics
        if stats is None or not stats.has_null_count:
            return True
        nulls, rows = stats.null_count, rg.num_rows
        if p.op == "is_null":
            return nulls > 0
        if nulls >= rows:
            return False  # every other predicate is false on null
        if p.op in ("not_null", "!=", "not_in") or not stats.has_min_max:
            return True
        lower = _internal(p, arrow_type, stats.min)
        upper = _internal(p, arrow_type, stats.max)
        if lower is None or upper is None or is_nan(lower) or is_nan(upper):
            return True
        return range_might_match(p.op, p.values, lower, upper)


def _internal(p: BoundPredicate, arrow_type: pa.DataType, value: Any) -> Any:
    """A statistics value as the internal value of ``p``'s type; None: not usable."""
    t = p.field_type
    if isinstance(t, _EXACT):
        return value if not isinstance(value, bytes) else None
    if isinstance(t, DateType) and type(value) is dt.date:
        return (value - _EPOCH).days
    if isinstance(t, (TimestampType, TimestamptzType)) and pa.types.is_timestamp(arrow_type):
        return _micros(value, arrow_type.unit)
    return None


def _micros(value: Any, unit: str) -> int | None:
    """Microseconds of a timestamp statistic (nanosecond ones are not used: Python
    datetimes would truncate them)."""
    if unit not in _UNIT_MICROS:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, int):
        return value * _UNIT_MICROS[unit]
    return None
