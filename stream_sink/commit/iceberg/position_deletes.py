"""``deletes="positions"``: a batch's equality deletes resolved on the driver, at commit,
to the rows they delete, and committed as deletion vectors (v3) or position delete
files (v2) in the batch's own snapshot instead.

The CDC writers are unchanged: a key whose live row the writer itself wrote in this
batch is deleted by position there; every other key's delete arrives as an equality
delete file of the batch (staged in the operator state, never committed in this mode).
At commit (:func:`stream_sink.commit.iceberg.table_commit.commit_group`):

1. The lookup snapshot is the branch head. The :class:`KeyPositions` index (key -> data
   file and row of its live row; the NumPy hash table of :mod:`stream_sink.lookup.row_positions`,
   ~29 bytes per live integer key) must be at that snapshot: it is built from the table
   (each live data file's key columns minus what its deletes remove: vectors, position
   deletes and older equality deletes) on first use, after a restart, and whenever the
   head is not the snapshot it was last brought to (another writer committed);
   otherwise it is the one kept since this sink's previous commit.
2. The keys of the batch's equality delete files are looked up; the rows found become,
   per data file, its deletion vector merged with its current one (v3; every vector of
   the batch in one Puffin file) or position delete files (v2; one per partition).
3. The row delta adds the batch's data files, its own position deletes and these, and
   removes the replaced vectors; it is refused (:class:`StalePositionsError`, checked
   after every refresh) unless the head is still the lookup snapshot, so every data
   file the positions point at is live and its vector unchanged. On refusal the files
   written are deleted, the index dropped and the keys resolved again (bounded).
4. Once committed the index moves to the new snapshot: the resolved keys are forgotten
   and the batch's new data files' keys added (minus the rows its own deletes remove).

Invariants:
- No equality delete file is committed by a positions commit.
- Exact: a batch's equality delete applies to rows of a lower sequence number, i.e.
  exactly the live rows of the lookup snapshot, which is the snapshot the commit lands on.
- A key has one entry in the hash table; further live rows of the same key (only when
  another writer appended duplicates) are kept aside and deleted with it.
- The batch's equality delete files are kept: a restart replays the staged batch and
  resolves it again (they are never referenced by the table; orphan cleanup removes them).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from stream_sink.exceptions import CommitValidationError, StalePositionsError
from stream_sink.io.errors import quietly
from stream_sink.lookup.key_index import Column
from stream_sink.lookup.row_positions import NONE, RowPositions, by_file
from stream_sink.read.data_files import open_data_file
from stream_sink.read.deletes import DeleteReader
from stream_sink.read.file_projection import FileProjection
from stream_sink.read.scan import TableScan
from stream_sink.table.deletion_vectors import VectorFor, write_deletion_vectors
from stream_sink.table.manifest import DataFile, DataFileContent
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.name_mapping import table_name_mapping
from stream_sink.table.snapshots import Snapshot
from stream_sink.table.table import Table
from stream_sink.table.transforms import Identity
from stream_sink.table.types import NestedField
from stream_sink.write.config import WriteConfig
from stream_sink.write.deletes import PositionDeletes, position_delete_spec
from stream_sink.write.file_factory import OutputFileFactory
from stream_sink.write.result import WriteResult
from stream_sink.write.rolling import RollingFileWriter, Segment

DELETE_GRANULARITY = "write.delete.granularity"
"""Java's table property: ``file`` (the default) or ``partition``."""


class KeyPositions(RowPositions[DataFile]):
    """Key -> (data file, row) of every live row of a table at ``snapshot_id``."""

    def __init__(self, field_ids: tuple[int, ...], snapshot_id: int | None) -> None:
        super().__init__()
        self.field_ids = field_ids
        self.snapshot_id = snapshot_id
        self.deletes: dict[str, list[DataFile]] = {}
        """Per data file, its live position deletes (vectors, old position files)."""

    def add_file(self, f: DataFile, columns: Sequence[Column], live: np.ndarray) -> None:
        """Remember rows ``live`` of data file ``f`` (``columns``: its key columns)."""
        self.add(f.file_path, f, columns, live)


# --- reading keys ---------------------------------------------------------------------


class _Keys:
    """Reads key columns (by field id) of a table's data and equality delete files."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._mapping = table_name_mapping(table.metadata.properties, f"table {table.name}")
        self.deletes = DeleteReader(table.io, table.name, self.field)

    def field(self, field_id: int) -> NestedField:
        for s in [self.table.schema(), *sorted(self.table.metadata.schemas, key=_newest)]:
            if s.has_field(field_id):
                return s.find_field(field_id)
        raise CommitValidationError(
            f"table {self.table.name}: equality field id {field_id} is in no schema"
        )

    def read(self, f: DataFile, ids: Sequence[int], what: str) -> dict[int, Column]:
        fields = [NestedField(i, f"k{i}", self.field(i).field_type) for i in ids]
        t, name = self.table, self.table.name
        with open_data_file(t.io, f.file_path, f.file_format, what, name) as data:
            projection = FileProjection(
                data.schema, fields, self._mapping, location=f.file_path, by_name=False
            )
            rows = projection.conform(data.read(projection.columns), _constants(t, f))
        return {i: rows.column(f"k{i}") for i in ids}


def _newest(s: Any) -> int:
    return -int(s.schema_id)


def _constants(table: Table, f: DataFile) -> dict[int, object]:
    """Identity partition values by source field id (for key columns a file lacks)."""
    if f.content != DataFileContent.DATA:
        return {}
    spec = table.metadata.spec_by_id(f.spec_id)
    return {
        pf.source_id: f.partition[i]
        for i, pf in enumerate(spec.fields)
        if isinstance(pf.transform, Identity) and i < len(f.partition)
    }


def build_index(table: Table, head: Snapshot | None, field_ids: tuple[int, ...]) -> KeyPositions:
    """The index of the live rows of ``head`` (a scan of every live data file's keys)."""
    index = KeyPositions(field_ids, head.snapshot_id if head else None)
    if head is None:
        return index
    keys = _Keys(table)
    for task in TableScan(table, snapshot_id=head.snapshot_id).plan_files():
        f = task.data_file
        equality = keys.deletes.equality_keys(task.delete_files)
        ids = sorted({*field_ids, *(i for k in equality for i in k.field_ids)})
        columns = keys.read(f, ids, "data file")
        n = f.record_count
        dead = np.zeros(n, dtype=bool)
        gone = keys.deletes.positions_for(task.delete_files, f.file_path)
        dead[gone[gone < n]] = True
        for k in equality:
            dead |= k.deleted([columns[i] for i in k.field_ids])
        index.add_file(f, [columns[i] for i in field_ids], np.flatnonzero(~dead))
        positional = [d for d in task.delete_files if d.content == DataFileContent.POSITION_DELETES]
        if positional:
            index.deletes[f.file_path] = positional
    return index


# --- resolving a batch ---------------------------------------------------------------


@dataclass
class Resolution:
    """What a positions commit adds and removes, resolved at ``lookup_snapshot_id``."""

    result: WriteResult
    replaced: tuple[DataFile, ...] = ()
    written: tuple[str, ...] = ()
    lookup_snapshot_id: int | None = None
    resolved: int = 0
    """Rows of earlier snapshots the batch deletes by position."""
    _abort: list[Callable[[], None]] = field(default_factory=list)

    def unchanged(self, metadata: TableMetadata, head: Snapshot | None) -> None:
        """Validation: the head is still the lookup snapshot (StalePositionsError)."""
        now = head.snapshot_id if head else None
        if now != self.lookup_snapshot_id:
            raise StalePositionsError(
                f"snapshot {now} was committed after the batch's deletes were resolved at "
                f"snapshot {self.lookup_snapshot_id}; resolving them again"
            )


class PositionResolver:
    """The index of one table (kept between commits) and the resolution of a batch."""

    def __init__(self) -> None:
        self.index: KeyPositions | None = None
        self.builds = 0

    def resolve(self, table: Table, head: Snapshot | None, result: WriteResult) -> Resolution:
        """``result`` with its equality deletes replaced by positions at ``head``."""
        equality = [f for f in result.delete_files if f.content == DataFileContent.EQUALITY_DELETES]
        lookup = head.snapshot_id if head else None
        kept = replace(result, delete_files=_without(result.delete_files, equality))
        if not equality or result.truncate:  # a truncate empties the table first
            return Resolution(kept, lookup_snapshot_id=lookup)
        field_ids = _equality_ids(table, equality)
        index = self._index_at(table, head, field_ids)
        keys = _Keys(table)
        found = [index.take(_batch_keys(keys, f, field_ids)) for f in equality]
        encoded = np.unique(np.concatenate(found)) if found else NONE
        if not len(encoded):
            return Resolution(kept, lookup_snapshot_id=lookup)
        writer = _vectors if table.format_version >= 3 else _position_files
        resolution = writer(table, index, encoded, kept)
        resolution.lookup_snapshot_id = lookup
        resolution.resolved = len(encoded)
        return resolution

    def _index_at(
        self, table: Table, head: Snapshot | None, field_ids: tuple[int, ...]
    ) -> KeyPositions:
        index = self.index
        at = head.snapshot_id if head else None
        if index is None or index.snapshot_id != at or index.field_ids != field_ids:
            index = self.index = build_index(table, head, field_ids)
            self.builds += 1
        return index

    def committed(self, table: Table, result: WriteResult, snapshot_id: int) -> None:
        """Bring the index to ``snapshot_id``, the commit of ``result`` (resolved)."""
        index = self.index
        if index is None:
            return
        if result.truncate:
            self.index = None
            return
        keys = _Keys(table)
        own = list(result.delete_files)
        for f in result.data_files:
            columns = keys.read(f, index.field_ids, "data file")
            mine = [d for d in own if _may_delete_in(d, f.file_path)]
            gone = keys.deletes.positions_for(mine, f.file_path)
            live = np.ones(f.record_count, dtype=bool)
            live[gone[gone < f.record_count]] = False
            index.add_file(f, [columns[i] for i in index.field_ids], np.flatnonzero(live))
        for d in own:
            if d.content == DataFileContent.POSITION_DELETES and d.referenced_data_file:
                path = str(d.referenced_data_file)
                if d.is_deletion_vector:
                    index.deletes[path] = [d]
                else:
                    index.deletes.setdefault(path, []).append(d)
        index.snapshot_id = snapshot_id

    def abandon(self, table: Table, resolution: Resolution | None, *, delete: bool) -> None:
        """Drop the index (its keys were taken); delete the files written when ``delete``."""
        self.index = None
        if resolution is None or not delete:
            return
        for path in resolution.written:
            quietly(functools.partial(table.io.delete, path), "deleting")


def _may_delete_in(d: DataFile, data_path: str) -> bool:
    """A vector deletes only in its referenced data file (its positions name no file)."""
    return not d.is_deletion_vector or d.referenced_data_file == data_path


def _without(files: Sequence[DataFile], drop: Sequence[DataFile]) -> tuple[DataFile, ...]:
    paths = {f.file_path for f in drop}
    return tuple(f for f in files if f.file_path not in paths)


def _equality_ids(table: Table, files: Sequence[DataFile]) -> tuple[int, ...]:
    ids = {tuple(f.equality_ids or ()) for f in files}
    if len(ids) != 1 or not next(iter(ids)):
        raise CommitValidationError(
            f"table {table.name}: a positions batch's equality deletes must share one "
            f"non-empty set of equality field ids, got {sorted(ids)}"
        )
    return next(iter(ids))


def _batch_keys(keys: _Keys, f: DataFile, field_ids: tuple[int, ...]) -> list[Column]:
    columns = keys.read(f, field_ids, "equality delete file")
    return [columns[i] for i in field_ids]


def _vectors(
    table: Table, index: KeyPositions, encoded: np.ndarray, kept: WriteResult
) -> Resolution:
    """v3: per data file its vector merged with what its live deletes already delete."""
    reader = _Keys(table).deletes
    vectors, replaced = [], []
    for ordinal, rows in by_file(encoded):
        f = index.files[ordinal]
        old = index.deletes.get(f.file_path, [])
        merged = np.union1d(rows, reader.positions_for(old, f.file_path)) if old else rows
        vectors.append(VectorFor(f.file_path, f.spec_id, tuple(f.partition), merged))
        replaced += old
    location = f"{table.data_location}/positions-{uuid.uuid4()}-dv.puffin"
    written = write_deletion_vectors(table.io, location, vectors)
    result = replace(
        kept,
        delete_files=(*kept.delete_files, *written),
        referenced_data_files=(*kept.referenced_data_files, *(v.data_file for v in vectors)),
    )
    return Resolution(result, replaced=tuple(replaced), written=(location,))


def _position_files(
    table: Table, index: KeyPositions, encoded: np.ndarray, kept: WriteResult
) -> Resolution:
    """v2: one position delete file (rolling) per data file hit, naming it as its
    ``referenced_data_file``, as Java's writers do by default (``write.delete.granularity``
    ``file``): a reader opens it for that file only, and a concurrent compaction conflicts
    only with the files the batch deleted from (one file per partition spans every data
    file between its path bounds). ``write.delete.granularity=partition`` writes one per
    partition instead."""
    per_file = table.properties.get(DELETE_GRANULARITY, "file") != "partition"
    groups: dict[tuple[int, tuple[Any, ...], str], PositionDeletes] = {}
    for ordinal, rows in by_file(encoded):
        f = index.files[ordinal]
        key = (f.spec_id, tuple(f.partition), f.file_path if per_file else "")
        deletes = groups.setdefault(key, PositionDeletes())
        lo, hi = int(rows.min()), int(rows.max())
        every = deletes.positions_of([Segment(f.file_path, lo, 0, hi - lo + 1)])
        deletes.delete(every[rows - lo])
    config = WriteConfig.from_properties(table.properties)
    operation = f"positions-{uuid.uuid4()}"
    files: list[DataFile] = []
    referenced: list[str] = []
    writers: list[RollingFileWriter] = []
    try:
        factories: dict[tuple[int, tuple[Any, ...]], OutputFileFactory] = {}
        for (spec_id, partition, _), deletes in groups.items():
            if (spec_id, partition) not in factories:  # one per partition: names never repeat
                meta = table.metadata
                spec = meta.spec_by_id(spec_id).bind(meta.schema)
                factories[spec_id, partition] = OutputFileFactory(
                    table.data_location, spec, 0, 0, 0, operation
                )
            factory = factories[spec_id, partition]

            def open_writer(
                factory: OutputFileFactory = factory,
                spec_id: int = spec_id,
                partition: tuple[Any, ...] = partition,
            ) -> RollingFileWriter:
                writer = RollingFileWriter(
                    table.io,
                    factory,
                    position_delete_spec(config.parquet, spec_id),
                    config.delete_target_file_bytes,
                    partition=partition,
                    check_rows=config.size_check_rows,
                    suffix="pos-deletes",
                )
                writers.append(writer)
                return writer

            out = deletes.write(open_writer)
            files += out.files
            referenced += out.referenced_data_files
    except BaseException:
        for w in writers:
            w.abort()
        raise
    result = replace(
        kept,
        delete_files=(*kept.delete_files, *files),
        referenced_data_files=(*kept.referenced_data_files, *referenced),
    )
    return Resolution(result, written=tuple(f.file_path for f in files))
