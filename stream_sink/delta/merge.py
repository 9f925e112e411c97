"""Copy-on-write MERGE of a batch of keyed changes (Delta's MergeIntoCommand shape).

1. Net changes: per key, the last change of the batch in source order decides: ``+I`` /
   ``+U`` leave that row, ``-D`` (and ``-U`` in changelog mode) leave no row; ``-U`` in
   upsert mode is ignored.
2. Touched files: live files whose statistics (and partition values) may hold a touched
   key; each is read and the touched keys are anti-joined away. A file without a touched
   key is left alone; one with is removed and its remaining rows rewritten.
3. The batch's surviving rows are written as new files.
The result is one :class:`DeltaBatch` (removes + adds) for one log version; the removed
files are exactly the ones read, so a concurrent remove of any of them is a conflict.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.exceptions import MissingColumnError, NullKeyError, UnknownRowKindError
from stream_sink.io.fileio import FileIO

from .actions import AddFile, RemoveFile
from .batch import DeltaBatch
from .paths import absolute_location, serialize_partition_value
from .scan import read_file
from .snapshot import DeltaSnapshot
from .stats import json_value, may_contain
from .writer import conform, write_data_files

MergeMode = Literal["upsert", "changelog"]
ROW_KINDS = ("+I", "-U", "+U", "-D")
_POS = "__ss_pos"


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
    values). A key column in neither prunes nothing."""
    schema = snapshot.arrow_schema
    checks: list[Callable[[AddFile], bool]] = []
    for name, values in partitions.items():
        field = schema.field(name)
        serialized = {serialize_partition_value(v, field.type, name) for v in values}
        checks.append(_in_partitions(name, serialized))
    for name, (low, high) in ranges.items():
        field = schema.field(name)
        lo = json_value(low, field.type, upper=False)
        hi = json_value(high, field.type, upper=True)
        checks.append(_in_range(name, lo, hi))
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
    schema = snapshot.arrow_schema
    final, touched = net_changes(changes, keys, mode, row_kind_column, order_by)
    rewritten = rewrite_touched(snapshot, io, touched, keys)
    extra = [c for c in final.column_names if c not in schema.names]
    inserted = conform(final.drop_columns(extra), schema)
    adds = write_data_files(snapshot.location, inserted, schema, snapshot.partition_columns, io=io)
    return DeltaBatch((*rewritten.adds, *adds), rewritten.removes)


def rewrite_touched(
    snapshot: DeltaSnapshot, io: FileIO, touched: pa.Table, keys: Sequence[str]
) -> DeltaBatch:
    """Step 2 of the MERGE: every live file that holds a ``touched`` key removed, and its
    other rows rewritten as new files. On failure the files written so far are deleted."""
    schema = snapshot.arrow_schema
    touched = conform_keys(touched, schema)
    now = int(time.time() * 1000)
    adds: list[AddFile] = []
    removes: list[RemoveFile] = []
    try:
        for add in touched_files(snapshot, touched):
            rows = read_file(snapshot, io, add, schema)
            kept = rows.join(touched, keys=list(keys), join_type="left anti", use_threads=False)
            if kept.num_rows == rows.num_rows:
                continue
            removes.append(add.remove(now))
            adds.extend(
                write_data_files(
                    snapshot.location,
                    conform(kept, schema),
                    schema,
                    snapshot.partition_columns,
                    io=io,
                )
            )
    except BaseException:
        for a in adds:
            with contextlib.suppress(Exception):  # an orphan is harmless
                io.delete(absolute_location(snapshot.location, a.path))
        raise
    return DeltaBatch(tuple(adds), tuple(removes))


def conform_keys(touched: pa.Table, schema: pa.Schema) -> pa.Table:
    cols = [touched.column(n).cast(schema.field(n).type) for n in touched.column_names]
    return pa.Table.from_arrays(cols, names=touched.column_names)
