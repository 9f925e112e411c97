"""Removing orphan files: files under the table location that no metadata reaches.

Kept whatever their reachability (counted as ``protected``):
- files modified at or after ``older_than_ms`` (default: 3 days ago): a writer may
  have written them and not committed yet (a sink's pending batch lives only in its
  operator state, so age is what protects it from an engine that cannot read that);
- staging manifests (the sink's phase-1 files, named ``<job>-<sink>-<checkpoint>-
  <batch>-<token>-<n>.avro`` in the staging location), whatever their age, and every
  file they list;
- files a caller names in ``protected`` (the in-sink maintenance passes its sink's
  pending and staged files);
- the catalog's own files (``version-hint.text``) and the maintenance lock.

Directories of the data location that hold no file and were last modified before the
same age limit are removed too (every batch of the Spark write route writes into a
directory of its own, emptied once compaction and expiry removed its files); a
directory is only ever removed while empty.

Invariant: nothing reachable from any metadata file of the metadata log is deleted.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from stream_sink.exceptions import CorruptMetadataError, MissingFileError
from stream_sink.maintenance.reachable import reachable_files
from stream_sink.maintenance.results import RemoveOrphanFilesResult
from stream_sink.table.table import Table

log = logging.getLogger(__name__)

DEFAULT_ORPHAN_AGE_MS = 3 * 24 * 3600 * 1000
STAGING_MANIFEST = re.compile(r"^.+-\d+-\d+-[0-9a-f]{8}-\d{5}\.avro$")
KEPT_NAMES = ("version-hint.text",)
KEPT_SUFFIXES = (".lock",)


@dataclass(frozen=True)
class ListedFile:
    location: str
    size: int
    mtime_ms: int


def list_files(table: Table, root: str) -> list[ListedFile]:
    """Every file below ``root`` (recursively), as locations in ``root``'s form."""
    base = root.rstrip("/")
    return [ListedFile(f"{base}/{f.relative}", f.size, f.mtime_ms) for f in table.io.walk(root)]


def _normalize(location: str) -> str:
    return location[len("file:") :] if location.startswith("file:") else location


def staging_manifest_files(table: Table, listed: Iterable[ListedFile]) -> set[str]:
    """Staging manifests among ``listed`` and every file they list."""
    from stream_sink.table import avro_schemas as avro

    out: set[str] = set()
    for f in listed:
        if not STAGING_MANIFEST.match(f.location.rsplit("/", 1)[-1]):
            continue
        out.add(f.location)
        try:
            contents = avro.read_avro_file(table.io, f.location)
            out.update(str(r["data_file"]["file_path"]) for r in contents.records)
        except (MissingFileError, CorruptMetadataError, KeyError, TypeError) as e:
            log.warning(
                "table %s: cannot read staging manifest %s (%s); keeping it",
                table.name,
                f.location,
                e,
            )
    return out


def remove_orphan_files(
    table: Table,
    older_than_ms: int | None = None,
    dry_run: bool = False,
    protected: Iterable[str] = (),
) -> RemoveOrphanFilesResult:
    started = time.perf_counter()
    cutoff = older_than_ms if older_than_ms is not None else _now_ms() - DEFAULT_ORPHAN_AGE_MS
    reachable = {_normalize(p) for p in reachable_files(table)}
    roots = {table.location}
    staging_root = table.properties.get("stream-sink.manifests.location", "").strip()
    if staging_root and not staging_root.startswith(table.location):
        roots.add(staging_root)
    listed = [f for root in sorted(roots) for f in list_files(table, root)]
    keep = reachable | {_normalize(p) for p in protected}
    keep |= {_normalize(p) for p in staging_manifest_files(table, listed)}
    orphans: list[ListedFile] = []
    protected_count = 0
    for f in listed:
        where = _normalize(f.location)
        if where in reachable:
            continue
        name = where.rsplit("/", 1)[-1]
        if (
            where in keep
            or f.mtime_ms >= cutoff
            or name in KEPT_NAMES
            or name.endswith(KEPT_SUFFIXES)
        ):
            protected_count += 1
            continue
        orphans.append(f)
    deleted = 0
    if not dry_run:
        for f in orphans:
            try:
                table.io.delete(f.location)
                deleted += 1
            except OSError as e:
                log.warning("table %s: could not delete orphan %s: %s", table.name, f.location, e)
    empty_dirs = table.io.remove_empty_dirs(table.data_location, cutoff, dry_run)
    return RemoveOrphanFilesResult(
        orphans=tuple(f.location for f in orphans),
        orphan_bytes=sum(f.size for f in orphans),
        deleted=deleted,
        protected=protected_count,
        files_listed=len(listed),
        dry_run=dry_run,
        duration_ms=(time.perf_counter() - started) * 1000,
        empty_dirs=tuple(empty_dirs),
    )


def _now_ms() -> int:
    return int(time.time() * 1000)
