"""Equality deletes -> position deletes (v2) or deletion vectors (v3), so every reader,
pyiceberg included, can read a CDC table.

Planned on the current snapshot: for every live data file that live equality delete
files apply to (the spec's sequence-number and partition rules, as the reader plans
them), the rows those deletes remove and that no position delete already removes are
found and written as one position delete file naming that data file only (v2), or
(v3) as that data file's deletion vector: the positions of its current vector and
position deletes plus the new ones, all vectors of the run in one Puffin file. One
rewrite of delete files then removes every live equality delete file (and each
replaced vector) and adds the new files.

On a v3 table that still has position delete files from before its upgrade, the same
run retires them all, as the spec asks once vectors exist ("a DV must replace all
previously written position delete files"): every data file such a file applies to
and that has no vector gets one holding its position deletes (and its converted
equality deletes); a data file with a vector already has them in it (the spec: a
vector is written with the position deletes merged, and readers then ignore them).
Every position delete file is then removed in the same commit, file-scoped ones as
Java's vector writer removes those it merges, partition-scoped ones too (Java leaves
those to ``rewrite_position_delete_files``).

Invariants:
- Every row deleted before is deleted after, and no other: an equality delete file
  applies only to data files of a lower sequence number, all of which the plan saw;
  files committed later have higher sequence numbers.
- The commit is validated from the planned snapshot, and refused when a data file
  the new position deletes name was removed since (a compaction won) or an equality
  delete file being removed is gone (another conversion won), or (v3) a data file got
  a vector since that this run did not merge (ConcurrentDeletionVectorError). On
  refusal the files written are deleted and the table is left as it was.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import uuid
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from stream_sink.exceptions import (
    CommitStateUnknownError,
    CommitValidationError,
    InvalidOptionError,
)
from stream_sink.io.errors import quietly
from stream_sink.maintenance.inventory import LiveFile, inventory
from stream_sink.maintenance.results import ConvertEqualityDeletesResult
from stream_sink.read.data_files import open_data_file
from stream_sink.read.deletes import DeleteReader
from stream_sink.read.file_projection import FileProjection
from stream_sink.read.planner import FileScanTask
from stream_sink.read.scan import TableScan
from stream_sink.table.deletion_vectors import VectorFor, write_deletion_vectors
from stream_sink.table.manifest import DataFile, DataFileContent, ManifestEntryStatus
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.name_mapping import table_name_mapping
from stream_sink.table.schema import Schema
from stream_sink.table.snapshots import Snapshot
from stream_sink.table.table import Table
from stream_sink.table.types import NestedField
from stream_sink.write.config import WriteConfig
from stream_sink.write.deletes import PositionDeletes, position_delete_spec
from stream_sink.write.file_factory import OutputFileFactory
from stream_sink.write.rolling import RollingFileWriter, Segment

Progress = Callable[[int, int], None]


def convert_equality_deletes(
    table: Table, progress: Progress | None = None, max_files: int | None = None
) -> ConvertEqualityDeletesResult:
    """Convert the live equality delete files, at most ``max_files`` of them (the oldest
    first: lowest data sequence number; None: all). Converting some of them is exact:
    each equality delete file deletes on its own, so the ones left keep applying as
    before, and the position deletes written name only the rows the chosen ones delete."""
    if max_files is not None and max_files < 1:
        raise InvalidOptionError(f"max_files must be >= 1, got {max_files}")
    started = time.perf_counter()
    table.refresh()
    snapshot = table.current_snapshot()
    inv = inventory(table, snapshot)
    live = sorted(inv.equality_deletes, key=lambda f: f.sequence_number)
    chosen = live if max_files is None else live[:max_files]
    eq_deletes = [f.data_file for f in chosen]
    old_positions = _position_delete_files(table, inv.position_deletes)
    if snapshot is None or not (eq_deletes or old_positions):
        return ConvertEqualityDeletesResult(None, 0, 0, 0, 0, 0)
    paths = {f.file_path for f in eq_deletes}
    tasks = [
        _only(t, paths)
        for t in TableScan(table, snapshot_id=snapshot.snapshot_id).plan_files()
        if any(d.file_path in paths or _is_old_position_file(d) for d in t.delete_files)
    ]
    converter = _Converter(table, table.schema())
    converter.replaced += old_positions
    try:
        for i, task in enumerate(tasks):
            converter.convert(task)
            if progress is not None:
                progress(i + 1, len(tasks))
        converter.finish()
        snapshot_after = _commit(table, snapshot, eq_deletes, converter)
    except CommitStateUnknownError:
        raise
    except BaseException:
        converter.abort()
        raise
    return ConvertEqualityDeletesResult(
        snapshot_id=snapshot_after.snapshot_id,
        removed_equality_delete_files=len(eq_deletes),
        removed_equality_deletes=sum(f.record_count for f in eq_deletes),
        added_position_delete_files=len(converter.written),
        added_position_deletes=sum(f.record_count for f in converter.written),
        data_files_scanned=len(tasks),
        duration_ms=(time.perf_counter() - started) * 1000,
        remaining_equality_delete_files=len(live) - len(chosen),
        removed_position_delete_files=len(old_positions),
    )


def _position_delete_files(table: Table, files: Sequence[LiveFile]) -> list[DataFile]:
    """v3: the live position delete files (not vectors) this run retires; v1/v2: none."""
    if table.format_version < 3:
        return []
    return [f.data_file for f in files if _is_old_position_file(f.data_file)]


def _is_old_position_file(f: DataFile) -> bool:
    return f.content == DataFileContent.POSITION_DELETES and not f.is_deletion_vector


def _only(task: FileScanTask, equality_paths: set[str]) -> FileScanTask:
    """``task`` with its position deletes and only the equality deletes being converted."""
    kept = [
        d
        for d in task.delete_files
        if d.content != DataFileContent.EQUALITY_DELETES or d.file_path in equality_paths
    ]
    return dataclasses.replace(task, delete_files=kept)


def _commit(
    table: Table, planned: Snapshot, eq_deletes: list[DataFile], converter: _Converter
) -> Snapshot:
    op = table.new_rewrite()
    op.rewrite_files(
        (),
        (),
        deletes_to_remove=[*eq_deletes, *converter.replaced],
        deletes_to_add=converter.written,
    )
    op.validate_from_snapshot(planned.snapshot_id)
    referenced = set(converter.referenced)
    op.validate(lambda base, head: _referenced_still_live(table, base, head, planned, referenced))
    return op.commit()  # type: ignore[no-any-return]


def _referenced_still_live(
    table: Table,
    base: TableMetadata,
    head: Snapshot | None,
    planned: Snapshot,
    referenced: set[str],
) -> None:
    """Refuse when a snapshot after ``planned`` removed a data file in ``referenced``."""
    from stream_sink.maintenance.inventory import manifest_entries, manifest_list

    for snap in base.ancestors(head.snapshot_id if head else None):
        if snap.snapshot_id == planned.snapshot_id:
            return
        for m in manifest_list(table, snap):
            if m.added_snapshot_id != snap.snapshot_id or not m.has_deleted_files:
                continue
            for e in manifest_entries(table, m):
                if e.status == ManifestEntryStatus.DELETED and e.data_file.file_path in referenced:
                    raise CommitValidationError(
                        f"table {table.name}: data file {e.data_file.file_path} was removed by "
                        f"snapshot {snap.snapshot_id} while its equality deletes were being "
                        "converted; run the conversion again"
                    )


class _Converter:
    """Finds the rows equality deletes remove, per data file, and writes them as
    file-scoped position deletes."""

    def __init__(self, table: Table, schema: Schema) -> None:
        self._table = table
        self._schema = schema
        self._deletes = DeleteReader(table.io, table.name, self._field_for_id)
        self._mapping = table_name_mapping(table.metadata.properties, f"table {table.name}")
        config = WriteConfig.from_properties(table.properties)
        self._options = config.parquet
        self._target = config.delete_target_file_bytes
        self._check_rows = config.size_check_rows
        self._operation = f"convert-{uuid.uuid4()}"
        self._writers: list[RollingFileWriter] = []
        self._factories: dict[int, OutputFileFactory] = {}
        self.written: list[DataFile] = []
        self.referenced: list[str] = []
        self.replaced: list[DataFile] = []  # v3: vectors merged into new ones
        self._vectors: list[VectorFor] = []
        self._vectors_for_v3 = table.format_version >= 3
        self._puffin: str | None = None

    def convert(self, task: FileScanTask) -> None:
        deleted = self._deleted_positions(task)
        f = task.data_file
        if self._vectors_for_v3 and any(_is_old_position_file(d) for d in task.delete_files):
            self._add_vector(task, deleted)  # no vector yet: one replaces the position deletes
            return
        if not len(deleted):
            return
        if self._vectors_for_v3:
            self._add_vector(task, deleted)
            return
        positions = PositionDeletes()
        every_row = positions.positions_of([Segment(f.file_path, 0, 0, f.record_count)])
        positions.delete(every_row[deleted])
        files = positions.write(lambda: self._open_writer(f))
        self.written.extend(files.files)
        self.referenced.append(f.file_path)

    def _add_vector(self, task: FileScanTask, deleted: np.ndarray) -> None:
        """The data file's new vector: what its vector and position deletes delete
        (readers ignore those once a vector exists) plus ``deleted``."""
        f = task.data_file
        already = self._deletes.positions_for(task.delete_files, f.file_path)
        positions = np.union1d(already, deleted)
        if not len(positions):  # position delete files naming none of its rows
            return
        self._vectors.append(VectorFor(f.file_path, f.spec_id, tuple(f.partition), positions))
        self.replaced += [d for d in task.delete_files if d.is_deletion_vector]
        self.referenced.append(f.file_path)

    def finish(self) -> None:
        """Write the vectors collected (v3), all in one Puffin file."""
        if not self._vectors:
            return
        name = f"{self._operation}-dv.puffin"
        self._puffin = f"{self._table.data_location}/{name}"
        self.written += write_deletion_vectors(self._table.io, self._puffin, self._vectors)
        self._vectors = []

    def _deleted_positions(self, task: FileScanTask) -> np.ndarray:
        f = task.data_file
        keys = self._deletes.equality_keys(task.delete_files)
        if not keys:  # only position deletes to carry over (v3)
            return np.empty(0, dtype=np.int64)
        already = self._deletes.positions_for(task.delete_files, f.file_path)
        ids = sorted({i for k in keys for i in k.field_ids})
        fields = [NestedField(i, f"k{i}", self._field_for_id(i).field_type) for i in ids]
        io, name = self._table.io, self._table.name
        with open_data_file(io, f.file_path, f.file_format, "data file", name) as data:
            projection = FileProjection(
                data.schema, fields, self._mapping, location=f.file_path, by_name=False
            )
            table: pa.Table = projection.conform(
                data.read(projection.columns), _constants(self._table, f)
            )
        dead = np.zeros(table.num_rows, dtype=bool)
        for k in keys:
            dead |= k.deleted([table.column(f"k{i}") for i in k.field_ids])
        dead[already[already < len(dead)]] = False
        return np.flatnonzero(dead)

    def _open_writer(self, f: DataFile) -> RollingFileWriter:
        files = self._factories.get(f.spec_id)
        if files is None:  # one per spec: its counter keeps every file name unique
            meta = self._table.metadata  # paths need source types (identity, truncate)
            spec = meta.spec_by_id(f.spec_id).bind(meta.schema)
            files = OutputFileFactory(self._table.data_location, spec, 0, 0, 0, self._operation)
            self._factories[f.spec_id] = files
        writer = RollingFileWriter(
            self._table.io,
            files,
            position_delete_spec(self._options, f.spec_id),
            self._target,
            partition=tuple(f.partition),
            check_rows=self._check_rows,
            suffix="pos-deletes",
        )
        self._writers.append(writer)
        return writer

    def _field_for_id(self, field_id: int) -> NestedField:
        if self._schema.has_field(field_id):
            return self._schema.find_field(field_id)
        for s in sorted(self._table.metadata.schemas, key=lambda s: -s.schema_id):
            if s.has_field(field_id):
                return s.find_field(field_id)
        raise CommitValidationError(
            f"equality delete field id {field_id} is in no schema of table {self._table.name}"
        )

    def abort(self) -> None:
        for w in self._writers:
            w.abort()
        if self._puffin is not None:
            quietly(functools.partial(self._table.io.delete, self._puffin), "deleting")


def _constants(table: Table, f: DataFile) -> dict[int, object]:
    """Identity partition values by source field id (for key columns a file lacks)."""
    from stream_sink.table.transforms import Identity

    spec = table.metadata.spec_by_id(f.spec_id)
    return {
        pf.source_id: f.partition[i]
        for i, pf in enumerate(spec.fields)
        if isinstance(pf.transform, Identity) and i < len(f.partition)
    }
