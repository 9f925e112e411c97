"""Every file the table's metadata reaches: all metadata files in the metadata log,
and for each, every snapshot's manifest list, manifests and their data and delete
files (entries of any status).

Invariant: a file any retained metadata file can reach is in the set. For metadata
files of the log (not the current one) whatever is already gone is skipped: a
metadata file, manifest list or manifest that expiry deleted reaches nothing; the
current metadata's files must all be there (a missing one is an error naming it).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

from stream_sink.exceptions import MissingFileError
from stream_sink.maintenance.inventory import manifest_entries, manifest_list
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.table import Table

T = TypeVar("T")


def reachable_files(table: Table) -> set[str]:
    table.refresh()
    locations = [table.metadata_location, *(e.value for e in table.metadata.metadata_log)]
    found: set[str] = set()
    lists_seen: set[str] = set()
    manifests_seen: set[str] = set()
    for location in locations:
        metadata = _metadata(table, str(location))
        if metadata is None:
            continue
        current = location == table.metadata_location
        found.add(str(location))
        for snap in metadata.snapshots:
            if snap.manifest_list and snap.manifest_list in lists_seen:
                continue
            lists_seen.add(snap.manifest_list)
            if snap.manifest_list:  # "" for v1 manifests listed in the metadata itself
                found.add(snap.manifest_list)
            for m in _tolerant(partial(manifest_list, table, snap), current):
                found.add(m.manifest_path)
                if m.manifest_path in manifests_seen:
                    continue
                manifests_seen.add(m.manifest_path)
                entries = _tolerant(partial(manifest_entries, table, m), current)
                found.update(e.data_file.file_path for e in entries)
    return found


def _tolerant(read: Callable[[], list[T]], strict: bool) -> list[T]:
    try:
        return read()
    except MissingFileError:
        if strict:
            raise
        return []


def _metadata(table: Table, location: str) -> TableMetadata | None:
    if location == table.metadata_location:
        return table.metadata
    try:
        return table.catalog.read_metadata(location, table.identifier)
    except MissingFileError:
        return None
