"""Column statistics of a written Parquet file, from its footer (Java's ParquetMetrics).

These are what the Iceberg spec calls a data file's column "metrics" (sizes, value,
null and NaN counts, bounds), configured by ``write.metadata.metrics.*``
(:mod:`stream_sink.table.metrics_config`); operational counters are
:mod:`stream_sink.metrics`.

Invariants:
- Parquet leaf columns are, in order, the schema's primitive fields depth first
  (``Schema.leaf_fields``), so the i-th column chunk of every row group is field
  ``leaf_ids[i]``; no name matching is needed.
- Mode ``none`` gives a column no metrics at all; ``counts`` gives column size, value,
  null and NaN counts; ``truncate(N)``/``full`` also give bounds.
- Bounds are kept only for primitive fields outside lists and maps. A null count is
  kept only when every row group has one (Java drops it otherwise).
- A bound taken from footer statistics is the exact min/max over the non-null,
  non-NaN values (Parquet writers leave NaN out of float statistics). Where a row
  group with values has no usable statistics, the field is reported in
  ``FooterColumnStats.unresolved`` for the caller to compute from the data.
- Bounds here are internal values; :func:`serialize_bounds` truncates and encodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq

from stream_sink.table.conversions import (
    to_bytes,
    truncate_lower,
    truncate_upper,
    unscaled_to_decimal,
)
from stream_sink.table.metrics_config import MetricsConfig, MetricsMode
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    BinaryType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    StringType,
)


@dataclass
class FooterColumnStats:
    column_sizes: dict[int, int] = field(default_factory=dict)
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    lower: dict[int, Any] = field(default_factory=dict)
    upper: dict[int, Any] = field(default_factory=dict)
    unresolved: set[int] = field(default_factory=set)
    split_offsets: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class ColumnStatsPlan:
    """What to collect for one schema and metrics config (computed once per writer)."""

    leaf_ids: tuple[int, ...]
    modes: dict[int, MetricsMode]
    types: dict[int, IcebergType]
    bounded: frozenset[int]
    nan_ids: tuple[int, ...]

    @staticmethod
    def build(schema: Schema, config: MetricsConfig) -> ColumnStatsPlan:
        leaves = list(schema.leaf_fields())
        modes = {f.field_id: config.mode_for(f.field_id) for f in leaves}
        outside = set(schema.primitive_field_ids_outside_collections())
        bounded = frozenset(fid for fid, m in modes.items() if m.has_bounds and fid in outside)
        nan_ids = tuple(
            f.field_id
            for f in leaves
            if modes[f.field_id].has_counts and isinstance(f.field_type, (FloatType, DoubleType))
        )
        return ColumnStatsPlan(
            leaf_ids=tuple(f.field_id for f in leaves),
            modes=modes,
            types={f.field_id: f.field_type for f in leaves},
            bounded=bounded,
            nan_ids=nan_ids,
        )


def footer_column_stats(md: pq.FileMetaData, plan: ColumnStatsPlan) -> FooterColumnStats:
    """Sizes, counts and (internal-value) bounds from the footer of a closed file."""
    out = FooterColumnStats()
    missing_nulls: set[int] = set()
    for r in range(md.num_row_groups):
        rg = md.row_group(r)
        if rg.num_columns:
            first = rg.column(0)
            start = first.dictionary_page_offset if first.has_dictionary_page else None
            out.split_offsets.append(start if start is not None else first.data_page_offset)
        for i in range(rg.num_columns):
            fid = plan.leaf_ids[i]
            if not plan.modes[fid].has_counts:
                continue
            chunk = rg.column(i)
            out.column_sizes[fid] = out.column_sizes.get(fid, 0) + chunk.total_compressed_size
            out.value_counts[fid] = out.value_counts.get(fid, 0) + chunk.num_values
            stats = chunk.statistics if chunk.is_stats_set else None
            if stats is None or not stats.has_null_count:
                missing_nulls.add(fid)
            else:
                out.null_value_counts[fid] = out.null_value_counts.get(fid, 0) + stats.null_count
            if fid in plan.bounded:
                _merge_bounds(out, fid, plan.types[fid], chunk, stats)
    for fid in missing_nulls:
        out.null_value_counts.pop(fid, None)
    for fid in out.unresolved:
        out.lower.pop(fid, None)
        out.upper.pop(fid, None)
    return out


def _merge_bounds(out: FooterColumnStats, fid: int, t: IcebergType, chunk: Any, stats: Any) -> None:
    if fid in out.unresolved:
        return
    if stats is None or not stats.has_min_max:
        nulls = stats.null_count if stats is not None and stats.has_null_count else None
        if nulls is None or chunk.num_values > nulls:
            out.unresolved.add(fid)  # values present but no bounds: compute from data
        return
    try:
        lo, hi = stat_value(t, stats.min_raw), stat_value(t, stats.max_raw)
    except (UnicodeDecodeError, ValueError):
        out.unresolved.add(fid)
        return
    if fid not in out.lower or lo < out.lower[fid]:
        out.lower[fid] = lo
    if fid not in out.upper or hi > out.upper[fid]:
        out.upper[fid] = hi


def stat_value(t: IcebergType, raw: Any) -> Any:
    """A Parquet statistics value (physical form) as Iceberg's internal value of ``t``."""
    if isinstance(t, StringType):
        return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    if isinstance(t, DecimalType):
        unscaled = int.from_bytes(raw, "big", signed=True) if isinstance(raw, bytes) else int(raw)
        return unscaled_to_decimal(unscaled, t.scale)
    return raw


def serialize_bounds(
    lower: dict[int, Any], upper: dict[int, Any], plan: ColumnStatsPlan
) -> tuple[dict[int, bytes], dict[int, bytes]]:
    """Bounds truncated per each column's mode and encoded in the single-value form."""
    lo_out: dict[int, bytes] = {}
    hi_out: dict[int, bytes] = {}
    for fid, value in lower.items():
        t, mode = plan.types[fid], plan.modes[fid]
        if mode.kind == "truncate" and isinstance(t, (StringType, BinaryType)):
            assert mode.length is not None
            value = truncate_lower(t, value, mode.length)
        lo_out[fid] = to_bytes(t, value)
    for fid, value in upper.items():
        t, mode = plan.types[fid], plan.modes[fid]
        if mode.kind == "truncate" and isinstance(t, (StringType, BinaryType)):
            assert mode.length is not None
            value = truncate_upper(t, value, mode.length)
        if value is not None:
            hi_out[fid] = to_bytes(t, value)
    return lo_out, hi_out
