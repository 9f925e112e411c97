"""What a ``deletes="positions"`` drill checks beyond the rows: that no snapshot of its
Iceberg tables lists an equality delete file, and that a reader which refuses equality
deletes (pyiceberg) reads each table's last snapshot; that no version of its Delta table
rewrote a data file.

Invariants: an Iceberg positions stream commits its deletes as deletion vectors (v3) or
position delete files (v2) in the batch's own snapshot, so every manifest of every
snapshot holds data files and position deletes only, whatever the kills; a Delta
positions stream removes a file only to re-add it under a deletion vector (or, in a
truncating batch, removes every file live before it).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pyarrow as pa

from stream_sink.delta import DeltaTable
from stream_sink.delta.actions import AddFile, RemoveFile
from stream_sink.table.manifest import DataFileContent, read_manifest, read_manifest_list


def equality_delete_snapshots(table: Any) -> list[int]:
    """The ids of ``table``'s snapshots whose manifests list an equality delete file."""
    meta, out = table.metadata, []
    for snap in meta.snapshots:
        for m in read_manifest_list(table.io, snap.manifest_list):
            ptype = meta.spec_by_id(m.partition_spec_id).partition_type(meta.schema)
            if any(
                e.data_file.content == DataFileContent.EQUALITY_DELETES
                for e in read_manifest(table.io, m, ptype)
            ):
                out.append(snap.snapshot_id)
                break
    return out


def pyiceberg_read(metadata_location: str) -> pa.Table | None:
    """The table's current snapshot as pyiceberg reads it (None: pyiceberg is not
    installed, or the metadata is not a local file it can open here)."""
    if "://" in metadata_location:
        return None
    with contextlib.suppress(ImportError):
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(metadata_location).scan().to_arrow()
    return None


def delta_rewrite_versions(location: str) -> list[int]:
    """The versions of the Delta table at ``location`` that removed a data file without
    re-adding it under a deletion vector (a truncate, which removes every file live
    before it, is not one)."""
    table = DeltaTable.load(location)
    out = []
    for v in range(1, table.version + 1):
        actions = table.log.read_commit(v)
        removed = {a.path for a in actions if isinstance(a, RemoveFile)}
        marked = {a.path for a in actions if isinstance(a, AddFile) and a.deletion_vector}
        if removed - marked and removed != set(table.snapshot_at(v - 1).files):
            out.append(v)
    return out
