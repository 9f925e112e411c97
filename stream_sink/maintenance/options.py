"""``MaintenanceOptions``: what a sink's in-job maintenance runs, and when.

Triggers are Flink TableMaintenance's: maintenance runs after a commit once, since the
last run, at least ``commit_count`` snapshots were committed, or ``data_file_count``
data files, or ``equality_delete_file_count`` equality delete files or
``equality_delete_record_count`` equality deletes were added, or ``interval_ms`` passed.
A trigger set to None is off; at least one must be on. The counts are of what was
committed since the last run that completed: a run that failed or yielded leaves them
standing, so the next commit starts the run again (and a run that fell behind catches up
with the next one).

Work per run is bounded, and the schedule adapts to the backlog: compaction rewrites at
most ``max_rewrite_files_per_run`` files and ``max_rewrite_bytes_per_run`` bytes, the
conversion at most ``max_equality_delete_files_per_run`` equality delete files, the
metadata cleanup ``max_metadata_files_per_run`` files. A run that left work behind
(any of the three), or after which the table still holds more than
``backlog_data_files`` live data files or ``backlog_delete_files`` live delete files,
makes the next run due at the next commit instead of after the usual trigger, until a
run leaves nothing behind: a bounded run never adds to a micro-batch more than its
bound, and under a steady load the runs come as often as the backlog needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from stream_sink.exceptions import InvalidOptionError
from stream_sink.maintenance.lock import DEFAULT_LEASE_MS


@dataclass(frozen=True)
class MaintenanceOptions:
    # what runs (in this order)
    rewrite_data_files: bool = True
    convert_equality_deletes: bool = True
    rewrite_manifests: bool = False
    expire_snapshots: bool = True
    remove_orphan_files: bool = False
    remove_old_metadata_files: bool = True
    # when
    commit_count: int | None = 10
    data_file_count: int | None = None
    equality_delete_file_count: int | None = None
    equality_delete_record_count: int | None = None
    interval_ms: int | None = None
    # compaction
    target_file_size_bytes: int | None = None
    min_input_files: int = 5
    delete_file_threshold: int = 1
    # expiry: None = the table's history.expire.max-snapshot-age-ms (5 days)
    max_snapshot_age_ms: int | None = None
    retain_last: int = 1
    # orphans: None = 3 days
    orphan_age_ms: int | None = None
    # metadata files: at most this many removed per run (the rest in the next runs)
    max_metadata_files_per_run: int = 1000
    # work per run (None: unbounded) and the backlog that brings the next run forward
    max_rewrite_files_per_run: int | None = 200
    max_rewrite_bytes_per_run: int | None = 1 << 30
    max_equality_delete_files_per_run: int | None = 200
    backlog_data_files: int | None = None
    backlog_delete_files: int | None = None
    # running
    lock_lease_ms: int = DEFAULT_LEASE_MS
    background: bool = True
    failures_before_alert: int = 3
    """Runs failing in a row before ``metrics.failing`` (and ``stream-sink status``) say so."""

    def __post_init__(self) -> None:
        triggers = (
            self.commit_count,
            self.data_file_count,
            self.equality_delete_file_count,
            self.equality_delete_record_count,
            self.interval_ms,
        )
        if all(t is None for t in triggers):
            raise InvalidOptionError("MaintenanceOptions: set at least one trigger")
        for name, value in (
            ("commit_count", self.commit_count),
            ("data_file_count", self.data_file_count),
            ("equality_delete_file_count", self.equality_delete_file_count),
            ("equality_delete_record_count", self.equality_delete_record_count),
            ("interval_ms", self.interval_ms),
            ("retain_last", self.retain_last),
            ("lock_lease_ms", self.lock_lease_ms),
            ("max_metadata_files_per_run", self.max_metadata_files_per_run),
            ("failures_before_alert", self.failures_before_alert),
            ("max_rewrite_bytes_per_run", self.max_rewrite_bytes_per_run),
            ("max_equality_delete_files_per_run", self.max_equality_delete_files_per_run),
            ("backlog_data_files", self.backlog_data_files),
            ("backlog_delete_files", self.backlog_delete_files),
        ):
            if value is not None and value < 1:
                raise InvalidOptionError(f"MaintenanceOptions.{name} must be >= 1, got {value}")
        if self.max_rewrite_files_per_run is not None and self.max_rewrite_files_per_run < 2:
            raise InvalidOptionError(
                "MaintenanceOptions.max_rewrite_files_per_run must be >= 2 (a rewrite merges "
                f"files), got {self.max_rewrite_files_per_run}"
            )
