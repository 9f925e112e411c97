"""A DataFile for a Parquet file another writer wrote (e.g. Spark's own Parquet writer):
the metrics come from its footer, as for the files this package writes.

Invariants:
- The file must hold exactly the schema's columns, in the schema's order, each with its
  Iceberg field id (so the i-th column chunk is the i-th leaf field, as
  :mod:`.column_stats` assumes). Anything else is CorruptionError naming the file: a
  file whose ids do not match would be read wrongly by every reader.
- NaN counts of float/double fields are counted from the file's data (a footer has
  none, and some writers put NaN into min/max); their bounds are then recomputed
  without NaN when any was found. Fields whose footer had no usable bounds get them
  from the data too (as :class:`.parquet.ParquetAppender` does).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.exceptions import CorruptionError
from stream_sink.io import FileIO
from stream_sink.io.errors import io_failure
from stream_sink.table.manifest import DataFile, FileFormat
from stream_sink.write.column_stats import footer_column_stats, serialize_bounds
from stream_sink.write.parquet import FileSpec, all_nan_or_null, bounds_from_file, count_nan

FIELD_ID_KEY = b"PARQUET:field_id"


def describe_file(
    io: FileIO, location: str, spec: FileSpec, partition: tuple[Any, ...] = ()
) -> DataFile:
    """The DataFile (with column metrics) of the finished Parquet file at ``location``."""
    with io_failure("reading the footer of data file", location):
        with io.open_input(location) as f:
            pf = pq.ParquetFile(f)
            md = pf.metadata
            _check_field_ids(pf.schema_arrow, spec, location)
            nans = _nan_counts(pf, spec)
        size = io.size(location)
    plan = spec.plan
    m = footer_column_stats(md, plan)
    counts = (m.value_counts, m.null_value_counts, nans)
    redo = {fid for fid in m.unresolved if not all_nan_or_null(fid, *counts)}
    redo |= {fid for fid, n in nans.items() if n and fid in plan.bounded}
    for fid in redo:
        m.lower.pop(fid, None)
        m.upper.pop(fid, None)
    if redo:
        with io_failure("reading data file", location):
            lo, hi = bounds_from_file(io, location, spec, redo)
        m.lower.update(lo)
        m.upper.update(hi)
    lower, upper = serialize_bounds(m.lower, m.upper, plan)
    return DataFile(
        content=spec.content,
        file_path=location,
        file_format=FileFormat.PARQUET,
        spec_id=spec.spec_id,
        partition=tuple(partition),
        record_count=md.num_rows,
        file_size_in_bytes=size,
        column_sizes=m.column_sizes,
        value_counts=m.value_counts,
        null_value_counts=m.null_value_counts,
        nan_value_counts=nans,
        lower_bounds=lower,
        upper_bounds=upper,
        split_offsets=tuple(m.split_offsets),
        equality_ids=spec.equality_ids,
        sort_order_id=spec.sort_order_id,
    )


def _ids(schema: pa.Schema | pa.DataType) -> list[Any]:
    """Field ids of every field, depth first (None where a field has none)."""
    out: list[Any] = []
    fields = list(schema) if isinstance(schema, pa.Schema) else _children(schema)
    for f in fields:
        meta = f.metadata or {}
        raw = meta.get(FIELD_ID_KEY)
        out.append((f.name, int(raw) if raw is not None else None))
        out.extend(_ids(f.type))
    return out


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [t.value_field]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    return []


def _check_field_ids(found: pa.Schema, spec: FileSpec, location: str) -> None:
    expected = _ids(spec.arrow_schema)
    got = _ids(found)
    if [i for _, i in got] != [i for _, i in expected]:
        raise CorruptionError(
            f"data file {location}: its columns and field ids {got} are not the table "
            f"schema's {expected}; it cannot be added to the table"
        )


def _nan_counts(pf: pq.ParquetFile, spec: FileSpec) -> dict[int, int]:
    """NaN count of every float/double field with counts, from the file's data."""
    ids = spec.plan.nan_ids
    if not ids:
        return {}
    paths = spec.leaf_paths
    tops = sorted({int(paths[fid][0]) for fid in ids})
    table = pf.read(columns=[spec.arrow_schema.field(i).name for i in tops])
    return {fid: count_nan(table, (tops.index(int(paths[fid][0])), *paths[fid][1:])) for fid in ids}
