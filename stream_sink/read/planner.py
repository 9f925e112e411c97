"""Scan planning: from a snapshot and a bound filter to file scan tasks.

Steps (spec: "Scan Planning"):

1. read the snapshot's manifest list; skip manifests whose partition summaries
   cannot match the filter projected onto their spec;
2. index the live delete files of the remaining delete manifests;
3. for each live data file, skip it when its partition or column metrics cannot
   match, compute its residual filter, and attach the delete files that apply.

For incremental reads, :func:`plan_appends` lists the data files ADDED by append
snapshots in ``(from, to]`` (without deletes: appends only add rows).

Invariant: a task is produced for every live data file that may hold a matching
row; every other file is left unopened.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from stream_sink.exceptions import MissingFileError, StreamSinkError, ValidationError
from stream_sink.read.delete_index import DeleteIndex
from stream_sink.read.evaluators import file_might_match, partition_matches, summary_might_match
from stream_sink.read.expressions import AlwaysFalse, AlwaysTrue, Expression
from stream_sink.read.projection import project, residual
from stream_sink.table.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest,
    snapshot_manifests,
)
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.snapshots import Operation, Snapshot
from stream_sink.table.table import Table
from stream_sink.table.types import IcebergType, StructType


@dataclass(frozen=True)
class FileScanTask:
    """One data file to read, the delete files to apply to it, and the filter its
    rows still have to pass (``residual``; ``AlwaysTrue`` when the partition decides)."""

    data_file: DataFile
    delete_files: list[DataFile] = field(default_factory=list)
    residual: Expression = field(default_factory=AlwaysTrue)
    data_sequence_number: int = 0

    @property
    def file_path(self) -> str:
        return self.data_file.file_path


@dataclass(frozen=True)
class _SpecFilter:
    """The filter projected onto one partition spec."""

    spec: PartitionSpec
    partition_type: StructType
    projected: Expression
    index: dict[int, int]
    types: dict[int, IcebergType]


class Planner:
    """Plans the files of ``table`` that may hold rows matching bound ``row_filter``."""

    def __init__(self, table: Table, row_filter: Expression) -> None:
        self._table = table
        self._metadata: TableMetadata = table.metadata
        self._filter = row_filter
        self._specs = {s.spec_id: s for s in self._metadata.partition_specs}
        self._types = {
            f.field_id: f.field_type
            for schema in sorted(self._metadata.schemas, key=lambda s: s.schema_id)
            for f in schema.leaf_fields()
        }
        self._by_spec: dict[int, _SpecFilter] = {}
        self.manifests_read = 0

    # --- snapshots ------------------------------------------------------------------------

    def plan(self, snapshot: Snapshot | None) -> list[FileScanTask]:
        if snapshot is None or isinstance(self._filter, AlwaysFalse):
            return []
        manifests = self._manifest_list(snapshot)
        index = DeleteIndex(self._specs, self._types)
        for m in manifests:
            if m.content == ManifestContent.DELETES and self._manifest_may_match(m):
                for e in self._live_entries(m):
                    index.add(_seq(e), e.data_file)
        tasks = []
        for m in manifests:
            if m.content == ManifestContent.DATA and self._manifest_may_match(m):
                tasks += self._tasks(self._live_entries(m), index)
        return tasks

    def plan_appends(self, snapshots: Iterable[Snapshot]) -> list[FileScanTask]:
        """Data files ADDED by each of ``snapshots`` that is an append."""
        tasks = []
        for snap in snapshots:
            if snap.operation != Operation.APPEND:
                continue
            for m in self._manifest_list(snap):
                if (
                    m.content != ManifestContent.DATA
                    or m.added_snapshot_id != snap.snapshot_id
                    or not self._manifest_may_match(m)
                ):
                    continue
                added = (
                    e
                    for e in self._entries(m)
                    if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snap.snapshot_id
                )
                tasks += self._tasks(added, DeleteIndex(self._specs))
        return tasks

    # --- pruning -------------------------------------------------------------------------------

    def _tasks(self, entries: Iterable[ManifestEntry], index: DeleteIndex) -> list[FileScanTask]:
        out = []
        for e in entries:
            f = e.data_file
            sf = self._spec_filter(f.spec_id)
            if not partition_matches(sf.projected, f.partition, sf.index):
                continue
            if not file_might_match(self._filter, f):
                continue
            rest = residual(self._filter, sf.spec, tuple(f.partition))
            if isinstance(rest, AlwaysFalse):
                continue
            seq = _seq(e)
            out.append(FileScanTask(f, index.for_data_file(seq, f), rest, seq))
        return out

    def _manifest_may_match(self, m: ManifestFile) -> bool:
        if not (m.has_added_files or m.has_existing_files):
            return False
        if not m.partitions or isinstance(self._filter, AlwaysTrue):
            return True
        sf = self._spec_filter(m.partition_spec_id)
        if isinstance(sf.projected, AlwaysTrue):
            return True
        return summary_might_match(sf.projected, m.partitions, sf.index, sf.types)

    def _spec_filter(self, spec_id: int) -> _SpecFilter:
        sf = self._by_spec.get(spec_id)
        if sf is None:
            spec = self._specs.get(spec_id)
            if spec is None:
                raise ValidationError(
                    f"table {self._table.name} has no partition spec {spec_id} (corrupt manifest?)"
                )
            ptype = partition_type(self._metadata, spec)
            index = {f.field_id: i for i, f in enumerate(ptype.fields)}
            types = {f.field_id: f.field_type for f in ptype.fields}
            sf = _SpecFilter(spec, ptype, project(self._filter, spec), index, types)
            self._by_spec[spec_id] = sf
        return sf

    # --- reading metadata ------------------------------------------------------------------

    def _manifest_list(self, snapshot: Snapshot) -> list[ManifestFile]:
        try:
            return snapshot_manifests(self._table.io, snapshot)
        except MissingFileError as e:
            raise MissingFileError(
                f"manifest list {snapshot.manifest_list} of snapshot {snapshot.snapshot_id} "
                f"of table {self._table.name} is missing"
            ) from e

    def _entries(self, m: ManifestFile) -> list[ManifestEntry]:
        sf = self._spec_filter(m.partition_spec_id)
        self.manifests_read += 1
        try:
            return read_manifest(self._table.io, m, sf.partition_type)
        except MissingFileError as e:
            raise MissingFileError(
                f"manifest {m.manifest_path} of table {self._table.name} is missing"
            ) from e

    def _live_entries(self, m: ManifestFile) -> Iterator[ManifestEntry]:
        return (e for e in self._entries(m) if e.status != ManifestEntryStatus.DELETED)


def partition_type(metadata: TableMetadata, spec: PartitionSpec) -> StructType:
    """``spec``'s partition struct, with source types from the newest schema that has
    every source column (a source column may have been dropped since)."""
    newest_first = sorted(
        metadata.schemas,
        key=lambda s: (s.schema_id != metadata.current_schema_id, -s.schema_id),
    )
    for schema in newest_first:
        try:
            return spec.partition_type(schema)
        except StreamSinkError:
            continue
    return spec.partition_type(metadata.schema)


def _seq(e: ManifestEntry) -> int:
    return e.sequence_number if e.sequence_number is not None else 0
