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

What is listed, and so what may be deleted, is the table's own location only: the
table property ``stream-sink.manifests.location`` (anyone who may set a property may
set it) is read for staging manifests, to keep the files they list, and nothing there
is ever deleted. Locations are compared as Iceberg Java's ``DeleteOrphanFiles``
compares them (:mod:`stream_sink.io.locations`: ``s3a://``/``s3n://`` are ``s3://``, ``file:/x`` is
``file:///x`` is ``/x``); a listed file whose path the metadata names in another scheme
or authority stops the run before anything is deleted (ValidationError naming both):
it is refused, not guessed.

Directories of the data location (when it lies in the table's location) that hold no
file and were last modified before the same age limit are removed too (every batch of
the Spark write route writes into a directory of its own, emptied once compaction and
expiry removed its files); a directory is only ever removed while empty.

Invariant: nothing reachable from any metadata file of the metadata log is deleted,
and nothing outside the table's location.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from stream_sink.exceptions import CorruptMetadataError, MissingFileError, ValidationError
from stream_sink.io.locations import KnownFiles, is_under
from stream_sink.maintenance.reachable import reachable_files
from stream_sink.maintenance.results import RemoveOrphanFilesResult
from stream_sink.table.table import Table

log = logging.getLogger(__name__)

DEFAULT_ORPHAN_AGE_MS = 3 * 24 * 3600 * 1000
STAGING_MANIFEST = re.compile(r"^.+-\d+-\d+-[0-9a-f]{8}-\d{5}\.avro$")
KEPT_NAMES = ("version-hint.text",)
KEPT_SUFFIXES = (".lock",)
MANIFESTS_LOCATION = "stream-sink.manifests.location"
"""The table property naming where the sink stages its manifests (the sink's own
``commit.iceberg.watermark.MANIFESTS_LOCATION``, which this layer cannot import)."""


@dataclass(frozen=True)
class ListedFile:
    location: str
    size: int
    mtime_ms: int


def list_files(table: Table, root: str) -> list[ListedFile]:
    """Every file below ``root`` (recursively), as locations in ``root``'s form."""
    base = root.rstrip("/")
    return [ListedFile(f"{base}/{f.relative}", f.size, f.mtime_ms) for f in table.io.walk(root)]


def staging_root(table: Table) -> str | None:
    """``stream-sink.manifests.location`` when it lies outside the table's location
    (listed only for staging manifests, never deleted from); None otherwise."""
    root = table.properties.get(MANIFESTS_LOCATION, "").strip()
    if not root or is_under(root, table.location):
        return None
    return root


def staging_manifest_files(table: Table, listed: Iterable[ListedFile]) -> set[str]:
    """Staging manifests among ``listed`` and every file they list."""
    from stream_sink.table import avro_schemas as avro

    out: set[str] = set()
    for f in listed:
        if not _is_staging(f):
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
    reachable = KnownFiles(reachable_files(table))
    listed = list_files(table, table.location)
    outside = staging_root(table)
    staged = [f for f in list_files(table, outside) if _is_staging(f)] if outside else []
    keep = KnownFiles([*protected, *staging_manifest_files(table, [*listed, *staged])])
    orphans: list[ListedFile] = []
    conflicts: list[str] = []
    protected_count = 0
    for f in listed:
        found = reachable.match(f.location)
        if found:
            continue
        name = f.location.rsplit("/", 1)[-1]
        if (
            keep.has_path(f.location)
            or f.mtime_ms >= cutoff
            or name in KEPT_NAMES
            or name.endswith(KEPT_SUFFIXES)
        ):
            protected_count += 1
        elif found is None:
            conflicts.append(
                f"{f.location} (the metadata: {', '.join(reachable.spellings(f.location))})"
            )
        else:
            orphans.append(f)
    if conflicts:
        raise _conflict(table, conflicts)
    deleted = 0 if dry_run else _delete(table, orphans)
    data = table.data_location
    empty_dirs = (
        table.io.remove_empty_dirs(data, cutoff, dry_run) if is_under(data, table.location) else []
    )
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


def _is_staging(f: ListedFile) -> bool:
    return bool(STAGING_MANIFEST.match(f.location.rsplit("/", 1)[-1]))


def _delete(table: Table, orphans: list[ListedFile]) -> int:
    deleted = 0
    for f in orphans:
        try:
            table.io.delete(f.location)
            deleted += 1
        except OSError as e:
            log.warning("table %s: could not delete orphan %s: %s", table.name, f.location, e)
    return deleted


def _conflict(table: Table, conflicts: list[str]) -> ValidationError:
    shown = "; ".join(conflicts[:5]) + (
        f"; and {len(conflicts) - 5} more" if len(conflicts) > 5 else ""
    )
    return ValidationError(
        f"table {table.name}: orphan removal stopped, nothing deleted: {len(conflicts)} "
        f"listed files have the path of a file the metadata names, in another scheme or "
        f"authority, so whether they are orphans cannot be told: {shown}. Check that the "
        f"table location ({table.location}) names the store the metadata's files are on"
    )


def _now_ms() -> int:
    return int(time.time() * 1000)
