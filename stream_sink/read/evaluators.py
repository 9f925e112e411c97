"""Deciding whether a file or manifest can hold rows matching a bound filter.

Three judges, one question ("might any row match?"):

- :func:`file_might_match`: a data file by its column metrics (value and null
  counts, lower/upper bounds). Conservative: missing or undecodable metrics, NaN
  bounds and truncated string bounds never prune a file that could match.
- :func:`partition_matches`: one partition tuple against a filter projected onto
  partition fields (exact: partition values are exact).
- :func:`summary_might_match`: a manifest by its partition field summaries.

Invariant: ``False`` is returned only when no row can match; the scan's residual
filter decides row by row afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_sink.exceptions import CorruptMetadataError
from stream_sink.read.binding import BoundPredicate, might_match
from stream_sink.read.expressions import Expression
from stream_sink.read.literals import is_nan
from stream_sink.table.conversions import from_bytes
from stream_sink.table.manifest import DataFile, FieldSummary
from stream_sink.table.types import IcebergType, UUIDType

# --- shared -----------------------------------------------------------------------------


def range_might_match(op: str, values: Sequence[Any], lower: Any, upper: Any) -> bool:
    """Whether some value in ``[lower, upper]`` (None: unbounded) satisfies ``op values``."""
    if is_nan(lower) or is_nan(upper):
        return True
    try:
        if op == "<":
            return lower is None or lower < values[0]
        if op == "<=":
            return lower is None or lower <= values[0]
        if op == ">":
            return upper is None or upper > values[0]
        if op == ">=":
            return upper is None or upper >= values[0]
        if op in ("==", "in"):
            return any(
                (lower is None or lower <= v) and (upper is None or v <= upper) for v in values
            )
    except TypeError:
        return True
    return True


def decode_bound(t: IcebergType, raw: bytes | None) -> Any:
    """A serialized bound as an internal value; None when absent, not comparable
    (uuid, NaN) or undecodable."""
    if raw is None or isinstance(t, UUIDType):
        return None
    try:
        value = from_bytes(t, raw)
    except CorruptMetadataError:
        return None
    return None if is_nan(value) else value


# --- data files by column metrics ------------------------------------------------------


def file_might_match(expr: Expression, f: DataFile) -> bool:
    if f.record_count == 0:
        return False
    return might_match(expr, lambda p: _metrics_leaf(p, f))


def _metrics_leaf(p: BoundPredicate, f: DataFile) -> bool:
    fid = p.field_id
    values = (f.value_counts or {}).get(fid)
    nulls = (f.null_value_counts or {}).get(fid)
    if p.op == "is_null":
        return nulls is None or nulls > 0
    all_null = nulls is not None and values is not None and nulls >= values
    if all_null:
        return False  # every other predicate is false on null
    if p.op in ("not_null", "!=", "not_in"):
        return True
    lower = decode_bound(p.field_type, (f.lower_bounds or {}).get(fid))
    upper = decode_bound(p.field_type, (f.upper_bounds or {}).get(fid))
    return range_might_match(p.op, p.values, lower, upper)


# --- partitions -----------------------------------------------------------------------------


def partition_matches(expr: Expression, partition: Sequence[Any], index: dict[int, int]) -> bool:
    """Evaluate a projected filter on one partition tuple; ``index`` maps partition
    field id to tuple position."""
    return might_match(expr, lambda p: _partition_leaf(p, partition[index[p.field_id]]))


def _partition_leaf(p: BoundPredicate, v: Any) -> bool:
    if p.op == "is_null":
        return v is None
    if p.op == "not_null":
        return v is not None
    if v is None:
        return False
    return evaluate_value(p.op, v, p.values)


def evaluate_value(op: str, v: Any, values: Sequence[Any]) -> bool:
    """``v op values`` for a non-null ``v`` (SQL semantics, exact)."""
    try:
        if op == "==":
            return bool(v == values[0])
        if op == "!=":
            return bool(v != values[0])
        if op == "<":
            return bool(v < values[0])
        if op == "<=":
            return bool(v <= values[0])
        if op == ">":
            return bool(v > values[0])
        if op == ">=":
            return bool(v >= values[0])
        if op == "in":
            return v in values
        if op == "not_in":
            return v not in values
    except TypeError:
        return True
    raise ValueError(f"unknown predicate operator {op!r}")


# --- manifests by partition summaries ---------------------------------------------------------


def summary_might_match(
    expr: Expression,
    summaries: Sequence[FieldSummary],
    index: dict[int, int],
    types: dict[int, IcebergType],
) -> bool:
    """Whether a manifest whose partition fields have ``summaries`` may hold a
    matching file; ``types`` gives each partition field's result type by id."""

    def leaf(p: BoundPredicate) -> bool:
        pos = index[p.field_id]
        if pos >= len(summaries):
            return True
        return _summary_leaf(p, summaries[pos], types[p.field_id])

    return might_match(expr, leaf)


def _summary_leaf(p: BoundPredicate, s: FieldSummary, t: IcebergType) -> bool:
    only_nulls = s.lower_bound is None and s.upper_bound is None and s.contains_null
    if p.op == "is_null":
        return s.contains_null
    if only_nulls and not s.contains_nan:
        return False
    if p.op in ("not_null", "!=", "not_in"):
        return True
    lower, upper = decode_bound(t, s.lower_bound), decode_bound(t, s.upper_bound)
    return range_might_match(p.op, p.values, lower, upper)
