"""A CDC batch's touched keys spilled to files, so the commit that removes them from the
table never holds them all (the ``format("stream_sink")`` route into Delta).

Why spill files rather than per-file deletion vectors computed by the tasks: the
commit runs in a Python worker on the driver without a SparkSession, so it cannot hand
a join to executors; tasks could find the rows their keys delete, but only on tables
with deletion vectors (a table without them needs its touched files rewritten, which
needs every task's keys for that file in one place), and the commit would still hold
one position set per touched file and task. Spilled keys work for every table and
keep what the driver holds to one data file's key columns plus one chunk of keys.

Each task writes, under a folder of the sink's checkpoint location, one Parquet file of
its distinct keys (sorted, in row groups of :data:`CHUNK_ROWS`) and one file of their
sorted 64-bit hashes, and returns only a :class:`KeySpill`: the two paths, the count,
each key column's lowest and highest value, a partition key column's values (when at
most :data:`MAX_PARTITION_VALUES`), and where each of :data:`HASH_BUCKETS` hash ranges
starts in the hash file. The commit then:

- checks that no key reached two tasks (:func:`shared_keys`), one range of hashes at a
  time: at most about ``keys / HASH_BUCKETS`` hashes (or one bucket) are held at once;
- when the batch has at most ``memory_keys`` keys, reads them all and rewrites as
  before (one hash join per file: the fastest);
- else (:func:`rewrite_spilled`) prunes the table's live files by each spill's bounds,
  and for each candidate file reads its key columns once and streams the spills that
  may hold one of its keys, chunk by chunk, collecting the positions they delete; the
  file is then rewritten or given a deletion vector exactly as
  :func:`~stream_sink.delta.merge.rewrite_file` does.

Invariants: the result is the same as ``rewrite_touched`` on all the keys (the same
files removed, the same rows kept); memory is bounded by one file's keys, one chunk of
:data:`CHUNK_ROWS` keys and its join, whatever the batch's size; the spill files are
deleted by :func:`remove_spills` once the batch is committed or aborted, and those of a
batch whose process died before its commit by :func:`sweep_spills` at the sink's next
commit (each sink spills into a folder of its own).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from stream_sink.io.fileio import FileIO

from .batch import DeltaBatch
from .merge import abort_written, conform_keys, files_for_keys, rewrite_file, rewrite_touched
from .snapshot import DeltaSnapshot

SPILL_FOLDER = "touched-keys"
"""The folder under the sink's checkpoint location that holds spill files."""
CHUNK_ROWS = 1 << 17
"""Keys per row group of a spill file, and per chunk the commit joins at once."""
HASH_BUCKETS = 1024
"""Hash ranges a spill indexes (by the hashes' top 10 bits)."""
MAX_PARTITION_VALUES = 1000
"""Values of a partition key column a spill names at most (beyond: no pruning by it)."""
HASH_DTYPE = np.dtype("<u8")


@dataclass(frozen=True)
class KeySpill:
    """One task's distinct touched keys, spilled (see the module docstring)."""

    keys_path: str
    hashes_path: str
    count: int
    ranges: tuple[tuple[str, Any, Any], ...]
    """(column, lowest, highest) of each key column that is not a partition column."""
    partitions: tuple[tuple[str, tuple[Any, ...] | None], ...]
    """(column, its distinct values or None when there are too many) of each key column
    that is a partition column."""
    bucket_starts: tuple[int, ...]
    """Where each hash bucket starts in the hash file (in hashes), and its length last."""


def write_spill(
    io: FileIO,
    folder: str,
    keys: pa.Table,
    hashes: np.ndarray,
    partition_columns: Sequence[str] = (),
) -> KeySpill:
    """Spill ``keys`` (distinct) and their 64-bit ``hashes`` under ``folder``."""
    name = f"{folder.rstrip('/')}/{uuid.uuid4().hex}"
    keys = keys.sort_by([(c, "ascending") for c in keys.column_names])
    with io.open_output(f"{name}.parquet") as out:
        pq.write_table(keys, out, row_group_size=CHUNK_ROWS)
    ordered = np.sort(np.asarray(hashes, dtype=HASH_DTYPE))
    io.write_bytes(f"{name}.hashes", ordered.tobytes(), overwrite=True)
    edges = np.arange(HASH_BUCKETS + 1, dtype=np.uint64) << np.uint64(64 - 10)
    starts = np.searchsorted(ordered, edges[1:HASH_BUCKETS])
    ranges: list[tuple[str, Any, Any]] = []
    partitions: list[tuple[str, tuple[Any, ...] | None]] = []
    for col in keys.column_names:
        if col in partition_columns:
            values = pc.unique(keys.column(col))
            listed = tuple(values.to_pylist()) if len(values) <= MAX_PARTITION_VALUES else None
            partitions.append((col, listed))
        elif keys.num_rows:
            mm = pc.min_max(keys.column(col))
            ranges.append((col, mm["min"].as_py(), mm["max"].as_py()))
    return KeySpill(
        f"{name}.parquet",
        f"{name}.hashes",
        keys.num_rows,
        tuple(ranges),
        tuple(partitions),
        (0, *(int(s) for s in starts), len(ordered)),
    )


def shared_keys(io: FileIO, spills: Sequence[KeySpill], chunk: int = CHUNK_ROWS * 8) -> int:
    """How many keys are in more than one spill (0: the tasks' keys are disjoint). Holds
    the hashes of a run of buckets at a time, about ``chunk`` of them (or one bucket)."""
    spills = [s for s in spills if s.count]
    if len(spills) < 2:
        return 0
    files = [io.open_input(s.hashes_path) for s in spills]
    try:
        shared, b = 0, 0
        while b < HASH_BUCKETS:
            end, size = b, 0
            while end < HASH_BUCKETS and (end == b or size + _bucket_sizes(spills, end) <= chunk):
                size += _bucket_sizes(spills, end)
                end += 1
            parts = [_read_hashes(f, s, b, end) for f, s in zip(files, spills, strict=True)]
            every = np.concatenate(parts)
            shared += every.size - np.unique(every).size
            b = end
        return shared
    finally:
        for f in files:
            f.close()


def _bucket_sizes(spills: Sequence[KeySpill], b: int) -> int:
    return sum(s.bucket_starts[b + 1] - s.bucket_starts[b] for s in spills)


def _read_hashes(f: pa.NativeFile, spill: KeySpill, first: int, end: int) -> np.ndarray:
    lo, hi = spill.bucket_starts[first], spill.bucket_starts[end]
    if hi == lo:
        return np.empty(0, HASH_DTYPE)
    raw = f.read_at((hi - lo) * HASH_DTYPE.itemsize, lo * HASH_DTYPE.itemsize)
    return np.frombuffer(raw, dtype=HASH_DTYPE)


def read_all(io: FileIO, spills: Sequence[KeySpill]) -> pa.Table | None:
    """Every spilled key as one table (None: no keys)."""
    parts = [_read(io, s.keys_path) for s in spills if s.count]
    return pa.concat_tables(parts, promote_options="permissive") if parts else None


def _read(io: FileIO, path: str) -> pa.Table:
    with io.open_input(path) as f:
        return pq.read_table(f)


def rewrite_spilled(
    snapshot: DeltaSnapshot,
    io: FileIO,
    spill_io: FileIO,
    spills: Sequence[KeySpill],
    keys: Sequence[str],
    memory_keys: int,
) -> DeltaBatch:
    """``rewrite_touched`` of every spilled key: in memory up to ``memory_keys`` keys,
    else streamed (see the module docstring)."""
    spills = [s for s in spills if s.count]
    if not spills:
        return DeltaBatch(())
    if sum(s.count for s in spills) <= memory_keys:
        touched = read_all(spill_io, spills)
        assert touched is not None
        return rewrite_touched(snapshot, io, touched, keys)
    by_file: dict[str, list[KeySpill]] = {}
    for s in spills:
        for add in files_for_keys(snapshot, _ranges(s), _partitions(s)):
            by_file.setdefault(add.path, []).append(s)
    schema = snapshot.arrow_schema
    now = int(time.time() * 1000)
    parts: list[DeltaBatch] = []
    try:
        for path in sorted(by_file):
            add = snapshot.files[path]
            chunks = _chunks(spill_io, by_file[path], schema, keys)
            part = rewrite_file(snapshot, io, add, pa.table({}), keys, now, chunks=chunks)
            if part is not None:
                parts.append(part)
    except BaseException:
        abort_written(snapshot.location, io, [a for p in parts for a in p.adds])
        raise
    return DeltaBatch.merge(parts)


def _ranges(s: KeySpill) -> dict[str, tuple[Any, Any]]:
    return {c: (lo, hi) for c, lo, hi in s.ranges}


def _partitions(s: KeySpill) -> dict[str, Sequence[Any]]:
    return {c: values for c, values in s.partitions if values is not None}


def _chunks(
    io: FileIO, spills: Sequence[KeySpill], schema: pa.Schema, keys: Sequence[str]
) -> Iterator[pa.Table]:
    """The keys of ``spills``, a chunk of at most :data:`CHUNK_ROWS` at a time, typed as
    the table's key columns."""
    for s in spills:
        with _open_parquet(io, s.keys_path) as pf:
            for batch in pf.iter_batches(batch_size=CHUNK_ROWS, columns=list(keys)):
                yield conform_keys(pa.Table.from_batches([batch]), schema)


@contextlib.contextmanager
def _open_parquet(io: FileIO, path: str) -> Iterator[pq.ParquetFile]:
    with io.open_input(path) as source:
        pf = pq.ParquetFile(source)
        try:
            yield pf
        finally:
            pf.close()


def sweep_spills(io: FileIO, folder: str, keep: Sequence[KeySpill]) -> list[str]:
    """Delete the files under ``folder`` that are not ``keep``'s: the spills of batches
    whose commit never ran (a process killed between the tasks' spilling and the
    commit; Spark runs such a batch's tasks again, which spill anew). Only the sink
    owning ``folder`` may call it, between its tasks and their commit. Best effort;
    returns the deleted locations."""
    kept = {p.rsplit("/", 1)[-1] for s in keep for p in (s.keys_path, s.hashes_path)}
    gone = []
    for entry in io.walk(folder):
        if entry.relative.rsplit("/", 1)[-1] in kept:  # spill files are named by a uuid
            continue
        location = f"{folder.rstrip('/')}/{entry.relative}"
        with contextlib.suppress(Exception):  # a leftover is harmless; next time then
            io.delete(location)
            gone.append(location)
    return gone


def remove_spills(io: FileIO, spills: Sequence[KeySpill]) -> None:
    """Delete the spill files (best effort: a leftover is harmless)."""
    for s in spills:
        for path in (s.keys_path, s.hashes_path):
            with contextlib.suppress(Exception):  # an orphan in the checkpoint is harmless
                io.delete(path)
