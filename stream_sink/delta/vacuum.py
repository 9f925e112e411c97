"""Deleting data files a Delta table no longer needs (Delta's VACUUM), bounded.

A file under the table's location is deleted when all of these hold:

- no live file (or its deletion vector) of the current version is it;
- no ``remove`` of the current version's tombstones that is younger than
  ``delta.deletedFileRetentionDuration`` (default ``interval 7 days``) names it (or its
  deletion vector): a reader of a version within the retention may still read it;
- its modification time is older than that retention too: a file written by a writer
  that has not committed yet (this sink's next batch, another writer) is young;
- it is not under ``_delta_log`` nor under a folder whose name starts with ``_`` or
  ``.`` (Delta's hidden folders, the sink's own spill folder), and its own name does not
  start with ``_`` or ``.`` either.

At most ``max_files`` files are deleted per call (the oldest first); the rest wait.

Invariants: every version within the retention stays readable (its files are live or
younger tombstones); a failure to delete one file only logs (an orphan is harmless).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from .deletion_vectors import dv_location
from .expired_logs import (
    DEFAULT_DELETED_FILE_RETENTION_MS,
    DELETED_FILE_RETENTION,
    deleted_file_retention_ms,
)
from .paths import absolute_location
from .table import DeltaTable

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_DELETED_FILE_RETENTION_MS",
    "DELETED_FILE_RETENTION",
    "VacuumResult",
    "deleted_file_retention_ms",
    "vacuum",
]


@dataclass(frozen=True)
class VacuumResult:
    deleted_files: int
    remaining_files: int
    """Deletable files left for a later call (``max_files``)."""


def vacuum(
    table: DeltaTable, *, max_files: int | None = None, now_ms: int | None = None
) -> VacuumResult:
    """Delete the files ``table`` no longer needs (see the module doc)."""
    snapshot = table.refresh().snapshot
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    horizon = now_ms - deleted_file_retention_ms(snapshot.configuration)
    root = snapshot.location.rstrip("/")
    keep: set[str] = set()
    for a in snapshot.files.values():
        keep.add(absolute_location(root, a.path))
        if a.deletion_vector is not None and a.deletion_vector.get("storageType") != "i":
            keep.add(dv_location(root, a.deletion_vector))
    for r in snapshot.tombstones.values():
        if (r.deletion_timestamp or 0) >= horizon:
            keep.add(absolute_location(root, r.path))
            if r.deletion_vector is not None and r.deletion_vector.get("storageType") != "i":
                keep.add(dv_location(root, r.deletion_vector))
    io = table.io
    doomed = sorted(
        (f.mtime_ms, f"{root}/{f.relative}")
        for f in io.walk(root)
        if not _hidden(f.relative) and f.mtime_ms < horizon and f"{root}/{f.relative}" not in keep
    )
    take = doomed if max_files is None else doomed[:max_files]
    deleted = 0
    for _, location in take:
        try:
            io.delete(location)
            deleted += 1
        except Exception as e:  # an orphan is harmless
            log.warning("vacuum of %s: could not delete %s: %s", root, location, e)
    return VacuumResult(deleted, len(doomed) - len(take))


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))
