"""Compaction of a Delta table's small files (Delta's OPTIMIZE, bin-pack), bounded.

Planning: the live files of each partition that are smaller than
:data:`SMALL_FRACTION` of the target size, or carry a deletion vector, are packed
smallest first into bins of at most the target size; a bin is rewritten when it has at
least ``min_input_files`` files, or one file with a deletion vector (rewriting it drops
the deleted rows for good). At most ``max_files`` files (and ``max_bytes``) are
rewritten per call, the partitions with the most small files first; the rest wait for
the next call.

Commit: one version, operation ``OPTIMIZE``: a ``remove`` of every input file and an
``add`` of every output file, all with ``dataChange=false`` (the rows did not change:
a streaming reader of the table skips the version), the removed files declared read so
that a concurrent remove of any of them (another writer's MERGE) is a conflict
(``CommitValidationError``; the written files are deleted, the table unchanged).

Invariants: the table's rows are the same before and after (deleted rows stay deleted:
files are read without the rows their deletion vectors delete); a file with rows
outside its partition cannot exist (outputs are written per partition).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from .actions import AddFile
from .merge import abort_written
from .scan import read_file
from .table import DeltaTable
from .writer import write_data_files

DEFAULT_TARGET_FILE_BYTES = 128 * 1024 * 1024
SMALL_FRACTION = 0.75


@dataclass(frozen=True)
class OptimizeResult:
    version: int | None
    """The OPTIMIZE version committed (None: nothing to do)."""
    removed_files: int
    added_files: int
    remaining_files: int
    """Small files left for a later call (``max_files``/``max_bytes``)."""


def plan_bins(
    files: Sequence[AddFile],
    target_bytes: int,
    min_input_files: int,
    max_files: int | None = None,
    max_bytes: int | None = None,
) -> tuple[list[list[AddFile]], int]:
    """The bins one call rewrites, and how many candidate files wait (module doc)."""
    by_partition: dict[tuple[tuple[str, str | None], ...], list[AddFile]] = {}
    for a in files:
        if a.size < SMALL_FRACTION * target_bytes or a.deletion_vector is not None:
            key = tuple(sorted(a.partition_values.items()))
            by_partition.setdefault(key, []).append(a)
    bins: list[list[AddFile]] = []
    for _, group in sorted(by_partition.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        current: list[AddFile] = []
        used = 0
        for a in sorted(group, key=lambda a: (a.size, a.path)):
            if current and used + a.size > target_bytes:
                bins.append(current)
                current, used = [], 0
            current.append(a)
            used += a.size
        if current:
            bins.append(current)
    qualifying = [
        b
        for b in bins
        if len(b) >= min_input_files or any(a.deletion_vector is not None for a in b)
    ]
    files_left = max_files if max_files is not None else 2**62
    bytes_left = max_bytes if max_bytes is not None else 2**62
    chosen: list[list[AddFile]] = []
    for b in qualifying:
        size = sum(a.size for a in b)
        if len(b) > files_left or size > bytes_left:
            if chosen:
                continue
            b = _cut(b, files_left, bytes_left)  # the first bin always progresses
            size = sum(a.size for a in b)
        chosen.append(b)
        files_left -= len(b)
        bytes_left -= size
    waiting = sum(len(b) for b in qualifying) - sum(len(b) for b in chosen)
    return chosen, waiting


def _cut(bin_: list[AddFile], max_files: int, max_bytes: int) -> list[AddFile]:
    out: list[AddFile] = []
    used = 0
    for a in bin_:
        if out and (len(out) >= max_files or used + a.size > max_bytes):
            break
        out.append(a)
        used += a.size
    return out


def optimize(
    table: DeltaTable,
    *,
    target_bytes: int = DEFAULT_TARGET_FILE_BYTES,
    min_input_files: int = 5,
    max_files: int | None = None,
    max_bytes: int | None = None,
) -> OptimizeResult:
    """Compact the small files of ``table``'s current version (see the module doc)."""
    snapshot = table.refresh().snapshot
    bins, waiting = plan_bins(
        list(snapshot.files.values()), target_bytes, min_input_files, max_files, max_bytes
    )
    if not bins:
        return OptimizeResult(None, 0, 0, waiting)
    io = table.io
    now = int(time.time() * 1000)
    added: list[AddFile] = []
    try:
        for b in bins:
            rows = pa.concat_tables([read_file(snapshot, io, a) for a in b])
            written = write_data_files(
                snapshot.location,
                rows,
                snapshot.arrow_schema,
                snapshot.partition_columns,
                io=io,
                target_file_rows=max(rows.num_rows, 1),
                mapping=snapshot.column_mapping,
            )
            added.extend(replace(a, data_change=False) for a in written)
        removed = [a.remove(now, data_change=False) for b in bins for a in b]
        txn = table.new_transaction().add_all(added).add_all(removed)
        txn.read_files(a.path for b in bins for a in b)
        version = txn.commit(
            "OPTIMIZE", {"predicate": "[]", "targetSize": str(target_bytes), "auto": "true"}
        )
    except BaseException:  # a conflict (CommitValidationError) included
        abort_written(snapshot.location, io, added)
        raise
    return OptimizeResult(version, len(removed), len(added), waiting)
