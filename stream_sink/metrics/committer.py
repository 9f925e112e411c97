"""Metrics the committer keeps: durations of the last checkpoint and commit, time since
the last successful commit, and counters of what it committed; the commit driver adds
its schedule's (commits in flight, time the driver waited for them).

Counters only grow and count files the table accepted (a refused or failed commit adds
nothing). ``snapshot()`` returns a frozen copy, safe to hand to an exporter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol


class CountedFile(Protocol):
    """What the counters read of a committed file (a table format's data or delete file)."""

    @property
    def is_delete(self) -> bool: ...

    @property
    def record_count(self) -> int: ...

    @property
    def file_size_in_bytes(self) -> int: ...


@dataclass(frozen=True)
class CommitterMetricsSnapshot:
    last_checkpoint_duration_ms: float | None
    last_commit_duration_ms: float | None
    seconds_since_last_successful_commit: float | None
    committed_data_files: int
    committed_delete_files: int
    committed_records: int
    committed_bytes: int
    commits: int
    committed_data_bytes: int = 0
    committed_delete_records: int = 0
    committed_delete_bytes: int = 0
    commits_in_flight: int = 0
    """Table commits running in the background now (``commit_mode="pipelined"``: 0 or 1)."""
    last_commit_wait_ms: float | None = None
    """How long the driver's last call waited for the commit in flight (pipelined)."""
    commit_wait_ms_total: float = 0.0
    """The driver's time spent waiting for commits in flight, in all (pipelined)."""


class CommitterMetrics:
    """Mutable, thread-safe holder of the committer's metrics; times come from ``clock``
    (seconds)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._checkpoint_ms: float | None = None
        self._commit_ms: float | None = None
        self._last_commit_at: float | None = None
        self._data_files = 0
        self._delete_files = 0
        self._records = 0
        self._bytes = 0
        self._commits = 0
        self._data_bytes = 0
        self._delete_records = 0
        self._delete_bytes = 0

    def checkpoint_duration(self, ms: float) -> None:
        with self._lock:
            self._checkpoint_ms = ms

    def committed(self, duration_ms: float, files: Iterable[CountedFile]) -> None:
        """One successful table commit that added ``files``."""
        with self._lock:
            self._commit_ms = duration_ms
            self._last_commit_at = self._clock()
            self._commits += 1
            for f in files:
                if f.is_delete:
                    self._delete_files += 1
                    self._delete_records += f.record_count
                    self._delete_bytes += f.file_size_in_bytes
                else:
                    self._data_files += 1
                    self._records += f.record_count
                    self._data_bytes += f.file_size_in_bytes
                self._bytes += f.file_size_in_bytes

    def snapshot(self) -> CommitterMetricsSnapshot:
        with self._lock:
            since = None if self._last_commit_at is None else self._clock() - self._last_commit_at
            return CommitterMetricsSnapshot(
                last_checkpoint_duration_ms=self._checkpoint_ms,
                last_commit_duration_ms=self._commit_ms,
                seconds_since_last_successful_commit=since,
                committed_data_files=self._data_files,
                committed_delete_files=self._delete_files,
                committed_records=self._records,
                committed_bytes=self._bytes,
                commits=self._commits,
                committed_data_bytes=self._data_bytes,
                committed_delete_records=self._delete_records,
                committed_delete_bytes=self._delete_bytes,
            )
