"""Every file a table's metadata reaches: all metadata files in the metadata log, and
for each, every snapshot's manifest list, manifests and their data and delete files
(entries of any status).

Invariant: a file any retained metadata file can reach is in the set. For metadata
files of the log (not the current one) whatever is already gone is skipped: a
metadata file, manifest list or manifest that expiry deleted reaches nothing; with
``strict`` the current metadata's files must all be there (a missing one is an error
naming it), else what is missing is skipped there too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from stream_sink.exceptions import MissingFileError
from stream_sink.io import FileIO
from stream_sink.table.manifest import read_manifest, snapshot_manifests
from stream_sink.table.metadata import TableMetadata

T = TypeVar("T")

ReadMetadata = Callable[[str], "TableMetadata | None"]
"""Reads an older metadata file of the log; None when it is gone."""


@dataclass(frozen=True)
class ReachableFiles:
    metadata: frozenset[str]
    """Metadata files, manifest lists and manifests."""
    content: frozenset[str]
    """Data and delete files."""

    @property
    def all(self) -> set[str]:
        return set(self.metadata | self.content)


def reachable_files(
    io: FileIO,
    current_location: str,
    current: TableMetadata,
    read_metadata: ReadMetadata,
    *,
    strict: bool = True,
) -> ReachableFiles:
    """What the metadata at ``current_location`` (``current``) and every metadata file
    of its log reach (see the module)."""
    locations = [current_location, *(str(e.value) for e in current.metadata_log)]
    meta: set[str] = set()
    content: set[str] = set()
    lists_seen: set[str] = set()
    manifests_seen: set[str] = set()
    for location in locations:
        is_current = location == current_location
        metadata = current if is_current else read_metadata(location)
        if metadata is None:
            continue
        must = strict and is_current
        meta.add(location)
        for snap in metadata.snapshots:
            if snap.manifest_list and snap.manifest_list in lists_seen:
                continue
            lists_seen.add(snap.manifest_list)
            if snap.manifest_list:  # "" for v1 manifests listed in the metadata itself
                meta.add(snap.manifest_list)
            for m in _tolerant(partial(snapshot_manifests, io, snap), must):
                meta.add(m.manifest_path)
                if m.manifest_path in manifests_seen:
                    continue
                manifests_seen.add(m.manifest_path)
                entries = _tolerant(partial(read_manifest, io, m), must)
                content.update(e.data_file.file_path for e in entries)
    return ReachableFiles(frozenset(meta), frozenset(content))


def _tolerant(read: Callable[[], list[T]], strict: bool) -> list[T]:
    try:
        return read()
    except MissingFileError:
        if strict:
            raise
        return []
