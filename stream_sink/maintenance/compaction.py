"""Compaction (Java's RewriteDataFiles, bin-pack strategy): plan on one snapshot,
rewrite each file group with its deletes applied, commit one rewrite.

Planning (``plan_rewrite``): the live data files of the snapshot that may hold rows
matching ``row_filter``, by (partition spec, partition). A file is a candidate when
it is smaller than 75% or larger than 180% of the target size (Java's defaults) or
has at least ``delete_file_threshold`` delete files applying to it. Candidates are
packed first-fit-decreasing into bins of the target size; a bin is rewritten when
it has at least ``min_input_files`` files (and more than one), more than the target
size in total, or a file with too many deletes.

Invariants:
- The commit is validated from the planned snapshot; with
  ``use_starting_sequence_number`` the new files take that snapshot's sequence number,
  so equality deletes committed since still apply to the rewritten rows and only
  new position deletes against a replaced file conflict (the compaction yields).
- On any failure but an unknown commit outcome, every file the execution wrote is
  deleted and the table is left as it was; CommitValidationError is raised as is.
- Position delete files that name only replaced files are removed with them (the
  rewrite operation drops delete files that can no longer apply).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from stream_sink.exceptions import CommitStateUnknownError, InvalidOptionError
from stream_sink.maintenance.results import RewriteDataFilesResult
from stream_sink.read.planner import FileScanTask
from stream_sink.read.scan import RowFilter, TableScan
from stream_sink.read.task_reader import TaskReader
from stream_sink.table.manifest import DataFile
from stream_sink.table.row_lineage import LINEAGE_FIELDS, with_lineage
from stream_sink.table.schema import Schema
from stream_sink.table.table import Table
from stream_sink.write.config import WriteConfig
from stream_sink.write.task_writers import TaskWriter
from stream_sink.write.writer_factory import TaskWriterFactory

Progress = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)`` after each file read."""

MIN_FILE_SIZE_RATIO = 0.75
MAX_FILE_SIZE_RATIO = 1.80


@dataclass(frozen=True)
class RewriteOptions:
    target_file_size_bytes: int | None = None
    min_input_files: int = 5
    delete_file_threshold: int = 1
    use_starting_sequence_number: bool = True
    row_filter: RowFilter = None
    max_files: int | None = None
    """Data files rewritten at most (None: no bound); the rest wait for the next plan."""
    max_bytes: int | None = None
    """Bytes of data files rewritten at most (None: no bound); a first group larger than
    that is cut down to it, so every plan with candidates makes progress."""

    def __post_init__(self) -> None:
        if self.max_files is not None and self.max_files < 2:
            raise InvalidOptionError(
                f"max_files must be >= 2 (a rewrite merges files), got {self.max_files}"
            )
        if self.max_bytes is not None and self.max_bytes < 1:
            raise InvalidOptionError(f"max_bytes must be >= 1, got {self.max_bytes}")
        if self.min_input_files < 1:
            raise InvalidOptionError(f"min_input_files must be >= 1, got {self.min_input_files}")
        if self.delete_file_threshold < 1:
            raise InvalidOptionError(
                f"delete_file_threshold must be >= 1, got {self.delete_file_threshold}"
            )
        if self.target_file_size_bytes is not None and self.target_file_size_bytes < 1:
            raise InvalidOptionError(
                f"target_file_size_bytes must be positive, got {self.target_file_size_bytes}"
            )


@dataclass(frozen=True)
class FileGroup:
    """Data files of one (spec, partition) rewritten together into new files."""

    spec_id: int
    partition: tuple[Any, ...]
    tasks: tuple[FileScanTask, ...]

    @property
    def data_files(self) -> list[DataFile]:
        return [t.data_file for t in self.tasks]

    @property
    def input_bytes(self) -> int:
        return sum(t.data_file.file_size_in_bytes for t in self.tasks)

    @property
    def input_records(self) -> int:
        return sum(t.data_file.record_count for t in self.tasks)

    @property
    def delete_files(self) -> dict[str, DataFile]:
        return {d.file_path: d for t in self.tasks for d in t.delete_files}


@dataclass(frozen=True)
class RewritePlan:
    """File groups to rewrite, bound to the snapshot they were planned on."""

    table: Table
    snapshot_id: int | None
    sequence_number: int
    schema: Schema
    options: RewriteOptions
    target_file_size_bytes: int
    groups: tuple[FileGroup, ...] = field(default=())
    remaining_files: int = 0
    """Data files that qualified but were left for a later plan (``max_files``/``max_bytes``)."""

    @property
    def input_files(self) -> int:
        return sum(len(g.tasks) for g in self.groups)

    @property
    def input_bytes(self) -> int:
        return sum(g.input_bytes for g in self.groups)

    def describe(self) -> dict[str, Any]:
        """The plan as a string-keyed map (``--dry-run``)."""
        return {
            "snapshot_id": self.snapshot_id,
            "target_file_size_bytes": self.target_file_size_bytes,
            "groups": [
                {
                    "spec_id": g.spec_id,
                    "partition": [_plain(v) for v in g.partition],
                    "data_files": len(g.tasks),
                    "bytes": g.input_bytes,
                    "records": g.input_records,
                    "delete_files": len(g.delete_files),
                }
                for g in self.groups
            ],
            "data_files": self.input_files,
            "bytes": self.input_bytes,
        }

    def execute(self, progress: Progress | None = None) -> RewriteDataFilesResult:
        """Rewrite the groups and commit (see the module invariants)."""
        return _execute(self, progress)


# --- planning ------------------------------------------------------------------------------


def plan_rewrite(table: Table, options: RewriteOptions) -> RewritePlan:
    table.refresh()
    snapshot = table.current_snapshot()
    target = (
        options.target_file_size_bytes
        or WriteConfig.from_properties(table.properties).target_file_bytes
    )
    plan = RewritePlan(
        table,
        snapshot.snapshot_id if snapshot else None,
        snapshot.sequence_number if snapshot else 0,
        table.schema(),
        options,
        target,
    )
    if snapshot is None:
        return plan
    scan = TableScan(table, snapshot_id=snapshot.snapshot_id, row_filter=options.row_filter)
    by_partition: dict[tuple[int, tuple[Any, ...]], list[FileScanTask]] = {}
    for task in scan.plan_files():
        f = task.data_file
        by_partition.setdefault((f.spec_id, tuple(f.partition)), []).append(task)
    groups: list[FileGroup] = []
    for (spec_id, partition), tasks in sorted(by_partition.items(), key=lambda kv: repr(kv[0])):
        candidates = [t for t in tasks if _is_candidate(t, target, options)]
        for bin_ in _pack(candidates, target):
            if _qualifies(bin_, target, options):
                groups.append(FileGroup(spec_id, partition, tuple(bin_)))
    chosen, remaining = bounded(groups, options.max_files, options.max_bytes)
    return RewritePlan(
        plan.table,
        plan.snapshot_id,
        plan.sequence_number,
        plan.schema,
        options,
        target,
        tuple(chosen),
        remaining,
    )


def bounded(
    groups: Sequence[FileGroup], max_files: int | None, max_bytes: int | None
) -> tuple[list[FileGroup], int]:
    """The groups one run rewrites within ``max_files``/``max_bytes``, and how many
    qualifying files are left. Groups with the most files go first (the most files
    removed per byte rewritten); a first group over the bound is cut down to it (its
    smallest files), so a plan with candidates always makes progress."""
    if max_files is None and max_bytes is None:
        return list(groups), 0
    files_left = max_files if max_files is not None else 2**62
    bytes_left = max_bytes if max_bytes is not None else 2**62
    chosen: list[FileGroup] = []
    for g in sorted(groups, key=lambda g: (-len(g.tasks), g.input_bytes)):
        take: FileGroup | None = g
        if len(g.tasks) > files_left or g.input_bytes > bytes_left:
            take = _cut(g, files_left, bytes_left) if not chosen else None
        if take is not None:
            chosen.append(take)
            files_left -= len(take.tasks)
            bytes_left -= take.input_bytes
    total = sum(len(g.tasks) for g in groups)
    return chosen, total - sum(len(g.tasks) for g in chosen)


def _cut(group: FileGroup, max_files: int, max_bytes: int) -> FileGroup | None:
    """``group``'s smallest files within the bounds (None: fewer than two fit)."""
    tasks: list[FileScanTask] = []
    used = 0
    for t in sorted(group.tasks, key=lambda t: t.data_file.file_size_in_bytes):
        size = t.data_file.file_size_in_bytes
        if len(tasks) == max_files or used + size > max_bytes:
            break
        tasks.append(t)
        used += size
    if not tasks:  # one file over the bound: rewritten alone (a run always progresses)
        tasks.append(min(group.tasks, key=lambda t: t.data_file.file_size_in_bytes))
    elif len(tasks) == 1 and len(group.tasks) > 1:
        return None  # one file of a bin would merge nothing
    return FileGroup(group.spec_id, group.partition, tuple(tasks))


def _too_many_deletes(task: FileScanTask, options: RewriteOptions) -> bool:
    return len(task.delete_files) >= options.delete_file_threshold


def _is_candidate(task: FileScanTask, target: int, options: RewriteOptions) -> bool:
    size = task.data_file.file_size_in_bytes
    return (
        size < MIN_FILE_SIZE_RATIO * target
        or size > MAX_FILE_SIZE_RATIO * target
        or _too_many_deletes(task, options)
    )


def _pack(tasks: Sequence[FileScanTask], target: int) -> list[list[FileScanTask]]:
    """First-fit decreasing into bins of ``target`` bytes (a larger file gets its own)."""
    bins: list[list[FileScanTask]] = []
    sizes: list[int] = []
    for task in sorted(tasks, key=lambda t: -t.data_file.file_size_in_bytes):
        size = task.data_file.file_size_in_bytes
        for i, used in enumerate(sizes):
            if used + size <= target:
                bins[i].append(task)
                sizes[i] += size
                break
        else:
            bins.append([task])
            sizes.append(size)
    return bins


def _qualifies(bin_: Sequence[FileScanTask], target: int, options: RewriteOptions) -> bool:
    n = len(bin_)
    total = sum(t.data_file.file_size_in_bytes for t in bin_)
    return (
        (n > 1 and n >= options.min_input_files)
        or (n > 1 and total > target)
        or total > MAX_FILE_SIZE_RATIO * target
        or any(_too_many_deletes(t, options) for t in bin_)
    )


# --- execution -----------------------------------------------------------------------------


def _execute(plan: RewritePlan, progress: Progress | None) -> RewriteDataFilesResult:
    started = time.perf_counter()
    if not plan.groups:
        return RewriteDataFilesResult(
            plan.snapshot_id, 0, 0, 0, 0, 0, 0, 0, 0, remaining_files=plan.remaining_files
        )
    table = plan.table
    writers: list[TaskWriter] = []
    try:
        written = _rewrite_groups(plan, writers, progress)
        removed = [f for g in plan.groups for f in g.data_files]
        op = table.new_rewrite()  # it also drops position deletes naming only removed files
        op.rewrite_files(removed, written)
        if plan.snapshot_id is not None:
            op.validate_from_snapshot(plan.snapshot_id)
        if plan.options.use_starting_sequence_number:
            op.data_sequence_number(plan.sequence_number)
        snapshot = op.commit()
    except CommitStateUnknownError:
        raise  # the files may now belong to the table
    except BaseException:
        for w in writers:
            w.abort()
        raise
    return RewriteDataFilesResult(
        snapshot_id=snapshot.snapshot_id,
        groups=len(plan.groups),
        rewritten_data_files=len(removed),
        added_data_files=len(written),
        rewritten_bytes=sum(f.file_size_in_bytes for f in removed),
        added_bytes=sum(f.file_size_in_bytes for f in written),
        removed_delete_files=int(snapshot.summary.get("removed-delete-files", "0")),
        rewritten_records=sum(f.record_count for f in removed),
        written_records=sum(f.record_count for f in written),
        remaining_files=plan.remaining_files,
        duration_ms=(time.perf_counter() - started) * 1000,
    )


def _rewrite_groups(
    plan: RewritePlan, writers: list[TaskWriter], progress: Progress | None
) -> list[DataFile]:
    table = plan.table
    factory = TaskWriterFactory.for_table(table, operation_id=f"rewrite-{uuid.uuid4()}")
    fields = plan.schema.fields
    if table.format_version >= 3:  # rows keep their lineage: write both columns (spec)
        fields = (*fields, *LINEAGE_FIELDS)
        factory = replace(factory, schema=with_lineage(factory.schema))
    reader = TaskReader(table, plan.schema, fields)
    config = factory.config
    if plan.target_file_size_bytes != config.target_file_bytes:
        config = replace(config, target_file_bytes=plan.target_file_size_bytes)
        factory = replace(factory, config=config)
    done, total = 0, plan.input_bytes
    written: list[DataFile] = []
    for i, group in enumerate(plan.groups):
        writer = factory.create(partition_id=i, task_id=0)
        writers.append(writer)
        for task in group.tasks:
            for part in reader.read(task):
                writer.write(part)
            done += task.data_file.file_size_in_bytes
            if progress is not None:
                progress(done, total)
        written.extend(writer.complete().data_files)
    return written


def _plain(v: Any) -> Any:
    return v if v is None or isinstance(v, (int, float, str, bool)) else str(v)
