"""Copy-on-write MERGE of a batch of keyed changes (Delta's MergeIntoCommand shape).

1. Net changes: per key, the last change of the batch in source order decides: ``+I`` /
   ``+U`` leave that row, ``-D`` (and ``-U`` in changelog mode) leave no row; ``-U`` in
   upsert mode is ignored.
2. Touched files: live files whose statistics (and partition values) may hold a touched
   key; each is read (without the rows its deletion vector deletes) and the touched keys
   are anti-joined away. A file without a touched key is left alone; one with is
   removed and either its remaining rows rewritten as a new file, or (on a table with
   ``delta.enableDeletionVectors``, when the file keeps at least
   :data:`DV_MAX_DELETED_FRACTION` of its rows) re-added with a deletion vector naming
   every row deleted so far (the old vector's rows and the new ones).
3. The batch's surviving rows are written as new files.
The result is one :class:`DeltaBatch` (removes + adds) for one log version; the removed
files are exactly the ones read (path and deletion vector), so a concurrent remove of any
of them, or a concurrent new deletion vector on one, is a conflict.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.exceptions import MissingColumnError, NullKeyError, UnknownRowKindError
from stream_sink.io.fileio import FileIO

from .actions import AddFile
from .batch import DeltaBatch
from .deletion_vectors import deleted_rows, write_deletion_vector
from .features import supports_deletion_vectors
from .paths import absolute_location, serialize_partition_value
from .scan import POSITION, read_file
from .snapshot import DeltaSnapshot
from .stats import json_value, may_contain, num_records, with_loose_bounds
from .writer import conform, write_data_files

MergeMode = Literal["upsert", "changelog"]
ROW_KINDS = ("+I", "-U", "+U", "-D")
_POS = "__ss_pos"
DV_MAX_DELETED_FRACTION = 0.2
"""A file whose deleted rows (old and new) stay within this fraction of its rows gets a
deletion vector instead of a rewrite. ``bench/bench_delta_deletion_vectors.py``: the
vector's MERGE is 1.5-1.8x faster up to 10% of a file's rows, even at 30%, while a read
after it pays 10-60% more as the fraction grows; so a file past 20% is rewritten."""


def net_changes(
    changes: pa.Table,
    keys: Sequence[str],
    mode: MergeMode,
    row_kind_column: str | None = None,
    order_by: Sequence[str] = (),
) -> tuple[pa.Table, pa.Table]:
    """(rows to leave per touched key, every touched key) of a batch of changes."""
    for k in keys:
        if k not in changes.column_names:
            raise MissingColumnError(f"key column {k!r} is not in the batch")
        if changes.column(k).null_count:
            raise NullKeyError(f"key column {k!r} has {changes.column(k).null_count} nulls")
    if order_by:
        changes = changes.take(pc.sort_indices(changes, [(c, "ascending") for c in order_by]))
    if row_kind_column is not None:
        kinds = changes.column(row_kind_column)
        bad = pc.invert(pc.is_in(kinds, pa.array(ROW_KINDS)))
        if pc.any(pc.fill_null(bad, True)).as_py():
            raise UnknownRowKindError(
                f"column {row_kind_column!r} holds row kinds other than {ROW_KINDS}"
            )
        if mode == "upsert":
            changes = changes.filter(pc.not_equal(kinds, "-U"))
    changes = changes.append_column(_POS, pa.array(range(changes.num_rows), pa.int64()))
    last = changes.group_by(list(keys), use_threads=False).aggregate([(_POS, "max")])
    positions = last.column(f"{_POS}_max")
    final = changes.take(pc.take(positions, pc.sort_indices(positions)))
    touched = final.select(list(keys))
    if row_kind_column is not None:
        alive = pc.is_in(final.column(row_kind_column), pa.array(["+I", "+U"]))
        final = final.filter(alive).drop_columns([row_kind_column])
    return final.drop_columns([_POS]), touched


def touched_files(snapshot: DeltaSnapshot, touched: pa.Table) -> list[AddFile]:
    """Live files whose statistics or partition values may hold a touched key."""
    if touched.num_rows == 0:
        return []
    ranges: dict[str, tuple[Any, Any]] = {}
    partitions: dict[str, list[Any]] = {}
    for name in touched.column_names:
        col = touched.column(name)
        if name in snapshot.partition_columns:
            partitions[name] = col.to_pylist()
        else:
            mm = pc.min_max(col)
            ranges[name] = (mm["min"].as_py(), mm["max"].as_py())
    return files_for_keys(snapshot, ranges, partitions)


def files_for_keys(
    snapshot: DeltaSnapshot,
    ranges: Mapping[str, tuple[Any, Any]],
    partitions: Mapping[str, Sequence[Any]],
) -> list[AddFile]:
    """Live files that may hold a key whose values lie in ``ranges`` (a column's lowest
    and highest value, from file statistics) and ``partitions`` (a partition column's
    values). Columns are named logically; statistics and partition values are looked up
    under their physical names (column mapping). A key column in neither prunes nothing."""
    schema = snapshot.arrow_schema
    mapping = snapshot.column_mapping
    checks: list[Callable[[AddFile], bool]] = []
    for name, values in partitions.items():
        field = schema.field(name)
        serialized = {serialize_partition_value(v, field.type, name) for v in values}
        checks.append(_in_partitions(mapping.physical_name(name), serialized))
    for name, (low, high) in ranges.items():
        field = schema.field(name)
        lo = json_value(low, field.type, upper=False)
        hi = json_value(high, field.type, upper=True)
        checks.append(_in_range(mapping.physical_name(name), lo, hi))
    files = sorted(snapshot.files.values(), key=lambda a: a.path)
    return [a for a in files if all(check(a) for check in checks)]


def _in_partitions(name: str, values: set[str | None]) -> Callable[[AddFile], bool]:
    return lambda a: a.partition_values.get(name) in values


def _in_range(name: str, lo: Any, hi: Any) -> Callable[[AddFile], bool]:
    return lambda a: may_contain(a.stats, name, lo, hi)


def copy_on_write(
    snapshot: DeltaSnapshot,
    io: FileIO,
    changes: pa.Table,
    keys: Sequence[str],
    mode: MergeMode,
    row_kind_column: str | None = None,
    order_by: Sequence[str] = (),
) -> DeltaBatch:
    """The files that apply ``changes`` to ``snapshot`` (see module docstring)."""
    final, touched = net_changes(changes, keys, mode, row_kind_column, order_by)
    rewritten = rewrite_touched(snapshot, io, touched, keys)
    adds = write_net_rows(snapshot, io, final)
    return DeltaBatch((*rewritten.adds, *adds), rewritten.removes)


def write_net_rows(snapshot: DeltaSnapshot, io: FileIO, final: pa.Table) -> list[AddFile]:
    """Step 3 of the MERGE: the rows a batch leaves (``net_changes``'s first table) as
    new data files, in the table's columns."""
    schema = snapshot.arrow_schema
    extra = [c for c in final.column_names if c not in schema.names]
    return write_data_files(
        snapshot.location,
        conform(final.drop_columns(extra), schema),
        schema,
        snapshot.partition_columns,
        io=io,
        mapping=snapshot.column_mapping,
    )


def rewrite_touched(
    snapshot: DeltaSnapshot, io: FileIO, touched: pa.Table, keys: Sequence[str]
) -> DeltaBatch:
    """Step 2 of the MERGE: every live file that holds a ``touched`` key removed, and its
    other rows rewritten or kept under a deletion vector. On failure the files written so
    far are deleted."""
    touched = conform_keys(touched, snapshot.arrow_schema)
    now = int(time.time() * 1000)
    parts: list[DeltaBatch] = []
    try:
        for add in touched_files(snapshot, touched):
            part = rewrite_file(snapshot, io, add, touched, keys, now)
            if part is not None:
                parts.append(part)
    except BaseException:
        abort_written(snapshot.location, io, [a for p in parts for a in p.adds])
        raise
    return DeltaBatch.merge(parts)


def rewrite_file(
    snapshot: DeltaSnapshot,
    io: FileIO,
    add: AddFile,
    touched: pa.Table,
    keys: Sequence[str],
    timestamp_ms: int,
    *,
    deletion_vectors: bool | None = None,
    chunks: Iterable[pa.Table] | None = None,
) -> DeltaBatch | None:
    """``add`` without the rows of ``touched`` keys; None when it holds none of them.
    ``deletion_vectors`` (default: what the table allows) permits a deletion vector.
    ``chunks``: the keys in parts instead of ``touched`` (joined one at a time, so only
    one part is held; :mod:`.key_spill`)."""
    schema = snapshot.arrow_schema
    if deletion_vectors is None:
        deletion_vectors = supports_deletion_vectors(snapshot.protocol, snapshot.configuration)
    total = num_records(add.stats)
    rows = None
    if deletion_vectors and total:  # a deletion vector needs the keys only
        key_schema = pa.schema([schema.field(k) for k in keys])
        slim = read_file(snapshot, io, add, key_schema, positions=True)
    else:
        rows = read_file(snapshot, io, add, schema, positions=True)
        slim = rows.select([*keys, POSITION])  # nested columns cannot pass through a join
    parts = chunks if chunks is not None else (touched,)
    found = [
        slim.join(part, keys=list(keys), join_type="left semi", use_threads=False)[POSITION]
        for part in parts
    ]
    gone = found[0] if chunks is None else _unique(found)
    if len(gone) == 0:
        return None
    kept_rows = slim.num_rows - len(gone)
    if deletion_vectors and total and kept_rows >= total * (1 - DV_MAX_DELETED_FRACTION):
        deleted = gone.to_numpy().astype(np.uint64)
        if add.deletion_vector is not None:
            where = f"Delta table {snapshot.location}, file {add.path}"
            old = deleted_rows(snapshot.location, io, add.deletion_vector, where)
            deleted = np.union1d(deleted, old)
        dv = write_deletion_vector(snapshot.location, io, deleted)
        readd = replace(
            add,
            deletion_vector=dv,
            data_change=True,
            stats=with_loose_bounds(add.stats),
            modification_time=timestamp_ms,
        )
        return DeltaBatch((readd,), (add.remove(timestamp_ms),))
    if rows is None:
        rows = read_file(snapshot, io, add, schema, positions=True)
    kept = rows.filter(pc.invert(pc.is_in(rows[POSITION], gone)))
    new = write_data_files(
        snapshot.location,
        conform(kept.drop_columns([POSITION]), schema),
        schema,
        snapshot.partition_columns,
        io=io,
        mapping=snapshot.column_mapping,
    )
    return DeltaBatch(tuple(new), (add.remove(timestamp_ms),))


def _unique(found: Sequence[pa.ChunkedArray]) -> pa.ChunkedArray:
    positions = [c.to_numpy() for c in found if len(c)]
    merged = np.unique(np.concatenate(positions)) if positions else np.empty(0, np.int64)
    return pa.chunked_array([pa.array(merged, pa.int64())])


def abort_written(location: str, io: FileIO, adds: Sequence[AddFile]) -> None:
    """Delete the data files ``adds`` wrote (a re-added file under a new deletion vector
    is the table's, never deleted; its orphaned vector file is harmless)."""
    for a in adds:
        if a.deletion_vector is not None:
            continue
        with contextlib.suppress(Exception):  # an orphan is harmless
            io.delete(absolute_location(location, a.path))


def conform_keys(touched: pa.Table, schema: pa.Schema) -> pa.Table:
    cols = [touched.column(n).cast(schema.field(n).type) for n in touched.column_names]
    return pa.Table.from_arrays(cols, names=touched.column_names)
