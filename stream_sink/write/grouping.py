"""Splitting a batch into its partitions, vectorized.

Invariants:
- Partition values are computed by the spec's transforms over whole columns; rows
  are grouped by a stable Arrow sort on those values (nulls form their own group),
  so no Python code runs per row, only per partition.
- Each group's row indices are ascending: rows keep their input order inside a
  partition (the CDC writers' positions rely on it).
- Groups come in order of their partition values (nulls last).
- The batch is copied once (one ``take`` in partition order), not once per partition.
- A group's ``nbytes``, when known, equals ``rows.nbytes`` (Arrow's count for the
  slice), computed for all groups at once from the copy's buffers instead of walking
  each slice's buffers (which costs more than the rest of a slice's bookkeeping).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.schema import Schema
from stream_sink.table.values import partition_tuples


@dataclass(frozen=True)
class PartitionGroup:
    """One partition's rows: ``rows`` (a zero-copy slice of one reordered copy of the
    batch) and ``indices``, their positions in the batch (None: all rows, in order);
    ``nbytes``: ``rows.nbytes`` when computed in advance (None: not known)."""

    partition: tuple[Any, ...]
    rows: pa.Table
    indices: pa.Array | None
    nbytes: int | None = None

    def rows_of(self, data: pa.Table) -> pa.Table:
        """This group's rows of ``data``, the batch the group was computed from."""
        return self.rows


def group_by_partition(data: pa.Table, spec: PartitionSpec, schema: Schema) -> list[PartitionGroup]:
    """The partitions ``data`` touches, each with its rows (see module invariants).

    The batch is copied once, reordered so that each partition's rows are contiguous;
    the groups are slices of that copy."""
    if data.num_rows == 0:
        return []
    keys = spec.compute(data, schema)
    types = [f.field_type for f in spec.partition_type(schema).fields]
    if all(_is_constant(k) for k in keys):
        only = partition_tuples([k.slice(0, 1) for k in keys], types)[0]
        return [PartitionGroup(only, data, None)]
    names = [f"k{i}" for i in range(len(keys))]
    # nulls sort last by default, NaN just before them
    order = pc.sort_indices(
        pa.table(keys, names=names), sort_keys=[(n, "ascending") for n in names]
    )
    starts = _group_starts([k.take(order) for k in keys])
    values = partition_tuples([k.take(order.take(pa.array(starts))) for k in keys], types)
    bounds = [*starts.tolist(), data.num_rows]
    reordered = data.take(order)
    sizes = slice_nbytes(reordered, bounds)
    return [
        PartitionGroup(
            value,
            reordered.slice(bounds[i], bounds[i + 1] - bounds[i]),
            order.slice(bounds[i], bounds[i + 1] - bounds[i]),
            None if sizes is None else int(sizes[i]),
        )
        for i, value in enumerate(values)
    ]


def slice_nbytes(table: pa.Table, bounds: list[int]) -> np.ndarray | None:
    """``table.slice(bounds[i], bounds[i + 1] - bounds[i]).nbytes`` for every i, computed
    at once; None when a column is not a single chunk of a fixed-width (not boolean) or
    string/binary type (then each slice's own ``nbytes`` is the answer).

    Arrow counts a sliced array as: its validity bitmap, if it has one, the bytes its
    bits fall in; fixed width: rows x width; string/binary: rows x offset width plus the value bytes
    between the slice's first and last offsets."""
    edges = np.asarray(bounds, dtype=np.int64)
    rows = np.diff(edges)
    total = np.zeros(len(rows), dtype=np.int64)
    for col in table.columns:
        if col.num_chunks != 1:
            return None
        arr = col.chunk(0)
        t = arr.type
        if arr.buffers()[0] is not None:  # the bytes the slice's bits touch
            total += (arr.offset + edges[1:] + 7) // 8 - (arr.offset + edges[:-1]) // 8
        if pa.types.is_boolean(t) or pa.types.is_dictionary(t):
            return None
        if _is_varwidth(t):
            width = 8 if pa.types.is_large_string(t) or pa.types.is_large_binary(t) else 4
            dtype = np.int64 if width == 8 else np.int32
            ends: np.ndarray = np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset + edges]
            ends = ends.astype(np.int64)
            total += rows * width + (ends[1:] - ends[:-1])
        elif pa.types.is_primitive(t):
            total += rows * (t.bit_width // 8)
        else:
            return None
    return total


def _is_varwidth(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )


def _group_starts(sorted_keys: list[pa.Array]) -> np.ndarray:
    """Positions where the sorted key tuple changes (0 included); null equals null, and
    NaN equals NaN (the sort puts each together)."""
    n = len(sorted_keys[0])
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in sorted_keys:
        head, tail = k.slice(0, n - 1), k.slice(1)
        differs = pc.fill_null(pc.not_equal(tail, head), False)
        if pa.types.is_floating(k.type):
            both_nan = pc.and_(pc.is_nan(tail), pc.is_nan(head))
            differs = pc.and_(differs, pc.invert(pc.fill_null(both_nan, False)))
        nullness = pc.not_equal(tail.is_null(), head.is_null())
        change[1:] |= pc.or_(differs, nullness).to_numpy(zero_copy_only=False)
    return np.flatnonzero(change)


def _is_constant(arr: pa.Array) -> bool:
    """Every element equal (all null counts as equal)."""
    nulls = arr.null_count
    if nulls == len(arr):
        return True
    if nulls:
        return False
    if pa.types.is_floating(arr.type):
        return False  # NaN breaks min == max reasoning; let the hash grouping decide
    mm = pc.min_max(arr)
    return bool(mm["min"] == mm["max"]) if mm["min"].is_valid else False
