"""Removing metadata files that fell out of the table's metadata log.

A commit writes a new ``*.metadata.json`` and (Java's ``TableMetadata`` rules) keeps
the newest ``write.metadata.previous-versions-max`` (100) earlier files in the metadata
log. Only with ``write.metadata.delete-after-commit.enabled=true`` does the commit
delete the files that fall out of the log; otherwise every file stays, one per commit:
a streaming table at a commit a second gains 86,400 a day. This removes them for such
tables.

Which files go: in the folder of the current metadata file, files named as a catalog
names metadata files (``v<N>``, or ``<N>-<uuid>`` as Java's and the SQL catalog's)
that are neither the current file nor in its metadata log, and whose version ``N`` is
below the current version.

Invariants:
- A file that may still become current is never removed: a commit's new file has the
  version of its base plus one, so a file at or below the current version that is not
  current was current once (or lost its compare-and-swap) and can never be again.
- Files of the metadata log are kept (they are what ``table recover`` goes back to);
  so is everything else in the folder (version hints, locks, files named otherwise).
- At most ``max_files`` files go per call (the rest next time); a failed delete is
  counted, never raised.
"""

from __future__ import annotations

import logging
import re
import time

from stream_sink.maintenance.results import RemoveMetadataFilesResult
from stream_sink.table.catalog.metadata_files import DELETE_AFTER_COMMIT
from stream_sink.table.table import Table

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(?:v(\d+)|(\d+)-[0-9a-fA-F-]{36})(?:\.gz)?\.metadata\.json(?:\.gz)?$")


def metadata_version(location: str) -> int | None:
    """The version in a metadata file's name (``v12...``, ``00012-<uuid>...``), else None."""
    match = _NAME.match(location.rstrip("/").rsplit("/", 1)[-1])
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def deletes_after_commit(table: Table) -> bool:
    """Whether the table's commits delete the metadata files that leave the log."""
    return table.properties.get(DELETE_AFTER_COMMIT, "false").strip().lower() == "true"


def removable_metadata_files(table: Table) -> list[str]:
    """The metadata files :func:`remove_old_metadata_files` would remove, oldest first."""
    current = table.metadata_location
    current_version = metadata_version(current)
    if current_version is None:
        return []
    folder = current.rsplit("/", 1)[0]
    kept = {current, *(str(e.value) for e in table.metadata.metadata_log)}
    found = []
    for location in table.io.list_dir(folder):
        version = metadata_version(location)
        if version is None or version >= current_version:
            continue
        if location in kept or _with_scheme_variants(location) & kept:
            continue
        found.append((version, location))
    return [loc for _, loc in sorted(found)]


def remove_old_metadata_files(
    table: Table, max_files: int | None = None, dry_run: bool = False
) -> RemoveMetadataFilesResult:
    """Remove (or, with ``dry_run``, only list) old metadata files; see the module doc."""
    started = time.perf_counter()
    table.refresh()
    candidates = removable_metadata_files(table)
    chosen = candidates if max_files is None else candidates[:max_files]
    removed = failed = 0
    if not dry_run:
        for location in chosen:
            try:
                table.io.delete(location)
                removed += 1
            except OSError as e:
                failed += 1
                log.warning("could not delete old metadata file %s: %s", location, e)
    return RemoveMetadataFilesResult(
        files=tuple(chosen),
        removed=removed,
        failed=failed,
        remaining=len(candidates) - removed,
        dry_run=dry_run,
        duration_ms=(time.perf_counter() - started) * 1000,
    )


def _with_scheme_variants(location: str) -> set[str]:
    """``file:/x`` and ``/x`` name the same local file in metadata logs."""
    if location.startswith("file:"):
        return {location.removeprefix("file:").replace("///", "/", 1)}
    if location.startswith("/"):
        return {f"file:{location}", f"file://{location}"}
    return set()


def metadata_files_warning(table: Table) -> str | None:
    """A warning when the table keeps metadata files its log no longer holds (its
    commits do not delete them and some are there); None otherwise."""
    if deletes_after_commit(table):
        return None
    stale = len(removable_metadata_files(table))
    if stale == 0:
        return None
    return (
        f"{stale} old metadata files are kept ({DELETE_AFTER_COMMIT} is off, so every "
        "commit leaves one): set it to true (with write.metadata.previous-versions-max), "
        "or let maintenance remove them (`table.maintenance.remove_old_metadata_files()`, "
        "in-sink maintenance does by default)"
    )
