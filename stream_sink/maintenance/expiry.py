"""Snapshot expiry and manifest rewriting through the table's operations, with results.

Invariant: what the table operations guarantee holds (Java's semantics; files still
referenced by a retained snapshot are never deleted; the sinks' watermark record
survives); this module only measures what changed.
"""

from __future__ import annotations

import time

from stream_sink.maintenance.inventory import manifest_list
from stream_sink.maintenance.results import ExpireSnapshotsResult, RewriteManifestsResult
from stream_sink.table.table import Table


def expire_snapshots(table: Table, older_than_ms: int, retain_last: int) -> ExpireSnapshotsResult:
    started = time.perf_counter()
    before = len(table.refresh().metadata.snapshots)
    op = table.new_expire_snapshots().expire_older_than(older_than_ms).retain_last(retain_last)
    outcome = op.commit()
    after = len(table.refresh().metadata.snapshots)
    return ExpireSnapshotsResult(
        before,
        after,
        outcome.snapshots_expired,
        outcome.files_deleted,
        (time.perf_counter() - started) * 1000,
    )


def rewrite_manifests(table: Table) -> RewriteManifestsResult:
    started = time.perf_counter()
    current = table.refresh().current_snapshot()
    if current is None:
        return RewriteManifestsResult(None, 0, 0)
    before = len(manifest_list(table, current))
    snapshot = table.new_rewrite_manifests().commit()
    after = len(manifest_list(table, snapshot))
    return RewriteManifestsResult(
        snapshot.snapshot_id, before, after, (time.perf_counter() - started) * 1000
    )
