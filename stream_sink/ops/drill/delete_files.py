"""What a ``deletes="positions"`` drill checks beyond the rows: that no snapshot of its
tables lists an equality delete file, and that a reader which refuses equality deletes
(pyiceberg) reads each table's last snapshot.

Invariant: a positions stream commits its deletes as deletion vectors (v3) or position
delete files (v2) in the batch's own snapshot, so every manifest of every snapshot holds
data files and position deletes only, whatever the kills.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pyarrow as pa

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
