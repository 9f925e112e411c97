"""What a snapshot holds: its live data and delete files with their data sequence numbers.

Invariant: entries come from the snapshot's manifests as written (DELETED entries
skipped, inherited sequence numbers filled in); a missing or damaged manifest raises
MissingFileError/CorruptMetadataError naming the file and the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from stream_sink.exceptions import CorruptMetadataError, MissingFileError
from stream_sink.read.planner import partition_type
from stream_sink.table.delete_index import single_path
from stream_sink.table.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    read_manifest,
    snapshot_manifests,
)
from stream_sink.table.manifest_list import ManifestFile
from stream_sink.table.snapshots import Snapshot
from stream_sink.table.table import Table


@dataclass(frozen=True)
class LiveFile:
    data_file: DataFile
    sequence_number: int

    @property
    def path(self) -> str:
        return self.data_file.file_path


@dataclass(frozen=True)
class Inventory:
    """The live files of one snapshot (``snapshot`` None: the empty table)."""

    snapshot: Snapshot | None
    manifests: tuple[ManifestFile, ...]
    data: tuple[LiveFile, ...]
    deletes: tuple[LiveFile, ...]

    @property
    def equality_deletes(self) -> list[LiveFile]:
        return [f for f in self.deletes if f.data_file.content == DataFileContent.EQUALITY_DELETES]

    @property
    def position_deletes(self) -> list[LiveFile]:
        return [f for f in self.deletes if f.data_file.content == DataFileContent.POSITION_DELETES]


def manifest_list(table: Table, snapshot: Snapshot) -> list[ManifestFile]:
    try:
        return snapshot_manifests(table.io, snapshot)
    except (MissingFileError, CorruptMetadataError) as e:
        raise type(e)(
            f"table {table.name}: manifest list {snapshot.manifest_list} of snapshot "
            f"{snapshot.snapshot_id} cannot be read ({e})"
        ) from e


def manifest_entries(table: Table, manifest: ManifestFile) -> list[ManifestEntry]:
    """Every entry of ``manifest`` (any status), sequence numbers inherited."""
    meta = table.metadata
    try:
        ptype = partition_type(meta, meta.spec_by_id(manifest.partition_spec_id))
        return read_manifest(table.io, manifest, ptype)
    except (MissingFileError, CorruptMetadataError) as e:
        raise type(e)(
            f"table {table.name}: manifest {manifest.manifest_path} cannot be read ({e})"
        ) from e


def inventory(table: Table, snapshot: Snapshot | None) -> Inventory:
    if snapshot is None:
        return Inventory(None, (), (), ())
    manifests = manifest_list(table, snapshot)
    data: list[LiveFile] = []
    deletes: list[LiveFile] = []
    for m in manifests:
        out = data if m.content == ManifestContent.DATA else deletes
        for e in manifest_entries(table, m):
            if e.is_live:
                out.append(LiveFile(e.data_file, e.sequence_number or 0))
    return Inventory(snapshot, tuple(manifests), tuple(data), tuple(deletes))


def file_scoped_target(f: DataFile) -> str | None:
    """The one data file a position delete file names, when it names only one."""
    if f.content != DataFileContent.POSITION_DELETES:
        return None
    return single_path(f)
