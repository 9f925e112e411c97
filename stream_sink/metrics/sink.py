"""What a sink reports about itself: its writers' output per micro-batch and its
committer's metrics (:mod:`stream_sink.metrics.committer`), as one frozen snapshot.

Invariants: writer counters only grow and count files the writers flushed (whether or
not they were committed yet: a replayed batch's files are counted again, like Flink's
flushed* counters); snapshots are copies, safe to hand to another thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from stream_sink.metrics.committer import CommitterMetricsSnapshot, CountedFile


class FlushedFiles(Protocol):
    """What the writer counters read of one micro-batch's write result."""

    @property
    def data_files(self) -> Sequence[CountedFile]: ...

    @property
    def delete_files(self) -> Sequence[CountedFile]: ...

    @property
    def referenced_data_files(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class WriterMetricsSnapshot:
    flushed_data_files: int = 0
    flushed_delete_files: int = 0
    flushed_referenced_data_files: int = 0
    flushed_data_records: int = 0
    flushed_delete_records: int = 0
    flushed_data_bytes: int = 0
    flushed_delete_bytes: int = 0
    last_flush_duration_ms: float | None = None
    """Wall time of the last micro-batch's write stage (executors, until results are in)."""
    batches: int = 0
    last_batch_id: int | None = None
    cdc_order_ties: int = 0
    """CDC changes whose key and order value equal the previous change's (applied in
    input order, the last one winning)."""


@dataclass(frozen=True)
class MaintenanceMetricsSnapshot:
    """What a sink's in-job maintenance did so far. Failures, conflicts and lock skips are
    counted, never raised into the stream."""

    runs: int = 0
    failures: int = 0
    conflicts: int = 0
    skipped_locked: int = 0
    last_duration_ms: float | None = None
    last_error: str | None = None
    rewritten_data_files: int = 0
    converted_equality_delete_files: int = 0
    expired_snapshots: int = 0
    removed_metadata_files: int = 0
    consecutive_failures: int = 0
    """Runs in a row that failed or yielded (0 after a run that completed); each such run
    is retried at the next commit."""
    failing: bool = False
    """``consecutive_failures`` reached ``MaintenanceOptions.failures_before_alert``."""
    last_success_ms: int | None = None
    """When the last run that completed every action ended (epoch ms)."""
    backlog_runs: int = 0
    """Completed runs that left work for the next one (their per-run bound was reached,
    or the table stayed over a backlog threshold): each brought the next run forward."""


@dataclass(frozen=True)
class SinkMetricsSnapshot:
    sink_id: str
    table: str
    writer: WriterMetricsSnapshot
    committer: CommitterMetricsSnapshot | None
    """None until the sink first restored its committer."""
    maintenance: MaintenanceMetricsSnapshot | None = None
    """None when the sink runs no maintenance."""


class WriterMetrics:
    """Thread-safe counters of what the writers of one sink flushed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = WriterMetricsSnapshot()

    def flushed(self, batch_id: int, result: FlushedFiles, duration_ms: float) -> None:
        """The write stage of ``batch_id`` produced ``result`` in ``duration_ms``."""
        data, deletes = result.data_files, result.delete_files
        with self._lock:
            s = self._snapshot
            self._snapshot = WriterMetricsSnapshot(
                flushed_data_files=s.flushed_data_files + len(data),
                flushed_delete_files=s.flushed_delete_files + len(deletes),
                flushed_referenced_data_files=(
                    s.flushed_referenced_data_files + len(result.referenced_data_files)
                ),
                flushed_data_records=s.flushed_data_records + sum(f.record_count for f in data),
                flushed_delete_records=(
                    s.flushed_delete_records + sum(f.record_count for f in deletes)
                ),
                flushed_data_bytes=s.flushed_data_bytes + sum(f.file_size_in_bytes for f in data),
                flushed_delete_bytes=(
                    s.flushed_delete_bytes + sum(f.file_size_in_bytes for f in deletes)
                ),
                last_flush_duration_ms=duration_ms,
                batches=s.batches + 1,
                last_batch_id=batch_id,
                cdc_order_ties=s.cdc_order_ties,
            )

    def ties(self, count: int) -> None:
        """``count`` more CDC order ties (see :attr:`WriterMetricsSnapshot.cdc_order_ties`)."""
        with self._lock:
            s = self._snapshot
            self._snapshot = replace(s, cdc_order_ties=s.cdc_order_ties + count)

    def snapshot(self) -> WriterMetricsSnapshot:
        with self._lock:
            return self._snapshot
