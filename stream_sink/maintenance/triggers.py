"""Counting what the table gained since the last maintenance run (Flink's
TableMaintenance TriggerEvaluator), from the snapshot summaries of new snapshots.

Invariant: every snapshot is counted once: ``observe`` walks from the branch head
back to the newest snapshot already seen (or as far as the metadata still has).
A run that did not complete leaves a retry standing: it is due again after
``retry_backoff`` more commits (1, 2, 4, ... up to 64 as failures repeat).
A run that completed but left a backlog (``backlog``: its bounded work did not reach
the end, or the table holds more live files than the options' backlog thresholds) is
due again at the next commit.

``saved``/``restored`` carry the state across processes (a sink whose every commit runs
in a fresh process keeps it in a file): everything but the options, as plain JSON values;
a saved state that cannot be read back restores as a fresh one (``restored`` never raises).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stream_sink.maintenance.options import MaintenanceOptions
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.snapshots import Operation


@dataclass
class TriggerState:
    options: MaintenanceOptions
    last_run_ms: int
    commits: int = 0
    data_files: int = 0
    equality_delete_files: int = 0
    equality_deletes: int = 0
    _seen: int | None = None
    retry_failures: int = 0
    """Runs in a row that did not complete; a retry is pending while > 0."""
    backlog: bool = False
    """The last completed run left work behind: the next commit starts another."""

    def observe(self, metadata: TableMetadata) -> None:
        head = metadata.current_snapshot()
        if head is None or head.snapshot_id == self._seen:
            return
        for snap in metadata.ancestors(head.snapshot_id):
            if snap.snapshot_id == self._seen:
                break
            if snap.operation == Operation.REPLACE:
                continue  # maintenance's own commits do not trigger maintenance
            s = snap.summary
            self.commits += 1
            self.data_files += int(s.get("added-data-files", "0"))
            self.equality_delete_files += int(s.get("added-equality-delete-files", "0"))
            self.equality_deletes += int(s.get("added-equality-deletes", "0"))
        self._seen = head.snapshot_id

    def saved(self) -> dict[str, Any]:
        """The state without its options, as JSON values (see :meth:`restored`)."""
        return {
            "last_run_ms": self.last_run_ms,
            "commits": self.commits,
            "data_files": self.data_files,
            "equality_delete_files": self.equality_delete_files,
            "equality_deletes": self.equality_deletes,
            "seen_snapshot_id": self._seen,
            "retry_failures": self.retry_failures,
            "backlog": self.backlog,
        }

    @staticmethod
    def restored(
        options: MaintenanceOptions, saved: Mapping[str, Any] | None, now_ms: int
    ) -> TriggerState:
        """The state :meth:`saved` gave, under ``options``; a fresh one (last run
        ``now_ms``) when ``saved`` is None or not a saved state."""
        fresh = TriggerState(options, last_run_ms=now_ms)
        if not saved:
            return fresh
        try:
            seen = saved.get("seen_snapshot_id")
            return TriggerState(
                options,
                last_run_ms=int(saved["last_run_ms"]),
                commits=int(saved["commits"]),
                data_files=int(saved["data_files"]),
                equality_delete_files=int(saved["equality_delete_files"]),
                equality_deletes=int(saved["equality_deletes"]),
                _seen=None if seen is None else int(seen),
                retry_failures=int(saved["retry_failures"]),
                backlog=bool(saved["backlog"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return fresh

    def retry_backoff(self) -> int:
        """Commits to wait before retrying a run that did not complete."""
        return min(2 ** max(self.retry_failures - 1, 0), MAX_RETRY_BACKOFF_COMMITS)

    def due(self, now_ms: int) -> bool:
        o = self.options
        if self.retry_failures and self.commits >= self.retry_backoff():
            return True
        if self.backlog and not self.retry_failures and self.commits >= 1:
            return True
        return (
            _reached(self.commits, o.commit_count)
            or _reached(self.data_files, o.data_file_count)
            or _reached(self.equality_delete_files, o.equality_delete_file_count)
            or _reached(self.equality_deletes, o.equality_delete_record_count)
            or (o.interval_ms is not None and now_ms - self.last_run_ms >= o.interval_ms)
        )

    def reset(self, now_ms: int) -> None:
        self.last_run_ms = now_ms
        self.commits = self.data_files = self.equality_delete_files = self.equality_deletes = 0


MAX_RETRY_BACKOFF_COMMITS = 64


def _reached(value: int, threshold: int | None) -> bool:
    return threshold is not None and value >= threshold
