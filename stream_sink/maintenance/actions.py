"""``table.maintenance``: the maintenance actions of one table (CONTRACT "Row-level
changes and maintenance").

The actions do not take the maintenance lock themselves: callers that share a table
with other maintainers (the sink's in-job maintenance, ``stream-sink maintain``) hold
``lock()`` around them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from stream_sink.exceptions import CommitValidationError, InvalidOptionError
from stream_sink.maintenance.compaction import Progress, RewriteOptions, RewritePlan, plan_rewrite
from stream_sink.maintenance.conversion import convert_equality_deletes
from stream_sink.maintenance.dangling import remove_dangling_deletes
from stream_sink.maintenance.lock import DEFAULT_LEASE_MS, MaintenanceLock
from stream_sink.maintenance.orphans import remove_orphan_files
from stream_sink.maintenance.results import (
    ConvertEqualityDeletesResult,
    ExpireSnapshotsResult,
    RemoveDanglingDeletesResult,
    RemoveMetadataFilesResult,
    RemoveOrphanFilesResult,
    RewriteDataFilesResult,
    RewriteManifestsResult,
)
from stream_sink.read.scan import RowFilter
from stream_sink.table.table import Table

log = logging.getLogger(__name__)

MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000
DEFAULT_REWRITE_ATTEMPTS = 3


class Maintenance:
    """Maintenance actions of ``table``; each returns a small frozen result."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def lock(
        self, purpose: str = "maintenance", lease_ms: int = DEFAULT_LEASE_MS
    ) -> MaintenanceLock:
        """The table's maintenance lock (``with m.lock(): ...`` takes and releases it;
        MaintenanceLockedError when another maintainer holds it)."""
        return MaintenanceLock.for_table(self.table, purpose, lease_ms)

    # --- compaction ------------------------------------------------------------------------

    def plan_rewrite_data_files(
        self,
        target_file_size_bytes: int | None = None,
        min_input_files: int = 5,
        delete_file_threshold: int = 1,
        use_starting_sequence_number: bool = True,
        row_filter: RowFilter = None,
        *,
        max_files: int | None = None,
        max_bytes: int | None = None,
    ) -> RewritePlan:
        """A compaction plan bound to the table's current snapshot; ``plan.execute()``.
        ``max_files``/``max_bytes`` bound the files it rewrites (the rest wait)."""
        options = RewriteOptions(
            target_file_size_bytes,
            min_input_files,
            delete_file_threshold,
            use_starting_sequence_number,
            row_filter,
            max_files,
            max_bytes,
        )
        return plan_rewrite(self.table, options)

    def rewrite_data_files(
        self,
        target_file_size_bytes: int | None = None,
        min_input_files: int = 5,
        delete_file_threshold: int = 1,
        use_starting_sequence_number: bool = True,
        row_filter: RowFilter = None,
        *,
        max_attempts: int = DEFAULT_REWRITE_ATTEMPTS,
        progress: Progress | None = None,
        max_files: int | None = None,
        max_bytes: int | None = None,
    ) -> RewriteDataFilesResult:
        """Plan and execute; on a conflict (CommitValidationError) plan again from the new
        current snapshot, at most ``max_attempts`` times in all, then raise the conflict."""
        if max_attempts < 1:
            raise InvalidOptionError(f"max_attempts must be >= 1, got {max_attempts}")
        for attempt in range(1, max_attempts + 1):
            plan = self.plan_rewrite_data_files(
                target_file_size_bytes,
                min_input_files,
                delete_file_threshold,
                use_starting_sequence_number,
                row_filter,
                max_files=max_files,
                max_bytes=max_bytes,
            )
            try:
                result = plan.execute(progress)
            except CommitValidationError as e:
                if attempt == max_attempts:
                    raise
                log.info("table %s: compaction conflicted (%s); planning again", self.table.name, e)
                continue
            return _with_attempts(result, attempt)
        raise AssertionError("unreachable")

    # --- deletes ----------------------------------------------------------------------------

    def convert_equality_deletes(
        self, progress: Progress | None = None, max_files: int | None = None
    ) -> ConvertEqualityDeletesResult:
        """Equality deletes -> position deletes (``stream_sink.maintenance.conversion``),
        at most ``max_files`` equality delete files (the oldest first)."""
        return convert_equality_deletes(self.table, progress, max_files)

    def remove_dangling_deletes(self) -> RemoveDanglingDeletesResult:
        """Remove delete files that can apply to no live data file."""
        return remove_dangling_deletes(self.table)

    # --- snapshots and files ----------------------------------------------------------------

    def expire_snapshots(
        self, older_than_ms: int | None = None, retain_last: int = 1
    ) -> ExpireSnapshotsResult:
        """Expire snapshots older than ``older_than_ms`` (default: now minus
        ``history.expire.max-snapshot-age-ms``, 5 days), keeping the last ``retain_last``
        of each branch; files only expired snapshots referenced are deleted."""
        from stream_sink.maintenance.expiry import expire_snapshots

        if older_than_ms is None:
            older_than_ms = int(time.time() * 1000) - max_snapshot_age_ms(self.table)
        return expire_snapshots(self.table, older_than_ms, retain_last)

    def remove_orphan_files(
        self,
        older_than_ms: int | None = None,
        dry_run: bool = False,
        *,
        protected: Iterable[str] = (),
    ) -> RemoveOrphanFilesResult:
        """Delete files under the table location that no metadata reaches
        (``stream_sink.maintenance.orphans`` says what is always kept)."""
        return remove_orphan_files(self.table, older_than_ms, dry_run, protected)

    def remove_old_metadata_files(
        self, max_files: int | None = None, dry_run: bool = False
    ) -> RemoveMetadataFilesResult:
        """Remove metadata files that are neither current nor in the metadata log
        (``stream_sink.maintenance.metadata_files``), at most ``max_files``."""
        from stream_sink.maintenance.metadata_files import remove_old_metadata_files

        return remove_old_metadata_files(self.table, max_files, dry_run)

    def rewrite_manifests(self) -> RewriteManifestsResult:
        """Rewrite the current snapshot's data manifests into few, clustered ones."""
        from stream_sink.maintenance.expiry import rewrite_manifests

        return rewrite_manifests(self.table)


def max_snapshot_age_ms(table: Table) -> int:
    raw = table.properties.get(MAX_SNAPSHOT_AGE_MS)
    try:
        return int(raw) if raw is not None else DEFAULT_MAX_SNAPSHOT_AGE_MS
    except ValueError:
        raise InvalidOptionError(
            f"table {table.name}: {MAX_SNAPSHOT_AGE_MS}={raw!r} is not an integer"
        ) from None


def _with_attempts(result: RewriteDataFilesResult, attempts: int) -> RewriteDataFilesResult:
    from dataclasses import replace

    return replace(result, attempts=attempts)
