"""Maintenance inside a streaming sink (Flink's TableMaintenance), on the driver.

``after_commit(metadata)`` is called by the sink after each checkpoint's commits with
the table state they produced. When a trigger is due and no run is under way, a run
starts (in a background thread unless ``options.background`` is False): it takes the
table's maintenance lock (a run that cannot is skipped and counted), then runs the
enabled actions in order: compaction, dangling delete removal, equality-delete
conversion, manifest rewrite, snapshot expiry, orphan removal.

Invariants:
- Never two runs of one sink at once; a due trigger during a run waits for the next
  commit after it.
- A failure or conflict of any action is logged and counted in ``metrics``; it never
  raises into the sink, and the sink never waits for a run (except ``close``).
- Runs use their own table handle: the sink's commits and the run race only through
  the catalog, where each commit validates (compaction yields, the sink does not).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from stream_sink.exceptions import CommitValidationError
from stream_sink.maintenance.actions import Maintenance
from stream_sink.maintenance.lock import MaintenanceLock
from stream_sink.maintenance.options import MaintenanceOptions
from stream_sink.maintenance.triggers import TriggerState
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.table import Table

log = logging.getLogger(__name__)


class SinkMaintenance:
    """Runs ``options``' maintenance for one sink's table (see the module docstring).

    ``load_table`` gives a fresh handle of the table; ``owner`` names the lock's holder
    (stable per sink, so a restarted sink takes back the lease a killed run left);
    ``protected`` (called on the caller's thread when a run starts) names files the sink
    holds but has not committed.
    """

    def __init__(
        self,
        load_table: Callable[[], Table],
        options: MaintenanceOptions,
        owner: str,
        protected: Callable[[], frozenset[str]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._load_table = load_table
        self.options = options
        self._owner = owner
        self._protected = protected
        self._clock = clock
        self._trigger = TriggerState(options, last_run_ms=int(clock() * 1000))
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()
        self._metrics = MaintenanceMetricsSnapshot()

    @property
    def metrics(self) -> MaintenanceMetricsSnapshot:
        with self._mutex:
            return self._metrics

    @property
    def running(self) -> bool:
        t = self._thread
        return t is not None and t.is_alive()

    def protect(self, protected: Callable[[], frozenset[str]] | None) -> None:
        """Name the files the sink holds uncommitted (called at trigger time)."""
        self._protected = protected

    def after_commit(self, metadata: TableMetadata) -> bool:
        """Count what the commits added; start a run when due. True when one started."""
        try:
            self._trigger.observe(metadata)
            now_ms = int(self._clock() * 1000)
            if self.running or not self._trigger.due(now_ms):
                return False
            self._trigger.reset(now_ms)
            protected = self._protected() if self._protected else frozenset()
        except Exception as e:  # never fail the stream
            self._record(failed=True, error=f"trigger: {e}")
            log.warning("maintenance trigger failed: %s", e)
            return False
        if self.options.background:
            self._thread = threading.Thread(
                target=self.run_once,
                args=(protected,),
                name=f"maintenance-{self._owner}",
                daemon=True,
            )
            self._thread.start()
        else:
            self.run_once(protected)
        return True

    def wait(self, timeout: float | None = None) -> None:
        t = self._thread
        if t is not None:
            t.join(timeout)

    close = wait

    def run_once(self, protected: frozenset[str] = frozenset()) -> None:
        """One run now on the calling thread (errors logged and counted, never raised)."""
        started = time.perf_counter()
        try:
            table = self._load_table()
            lock = MaintenanceLock.for_table(
                table, self._owner, self.options.lock_lease_ms, owner=self._owner
            )
            if not lock.try_acquire():
                log.info(
                    "table %s: maintenance skipped, lock held by %s", table.name, lock.holder()
                )
                self._bump(skipped_locked=1)
                return
            try:
                self._actions(Maintenance(table), lock, protected)
            finally:
                lock.release()
            self._record(duration_ms=(time.perf_counter() - started) * 1000)
        except CommitValidationError as e:
            log.info("maintenance yielded to a concurrent commit: %s", e)
            self._record(
                conflict=True, error=str(e), duration_ms=(time.perf_counter() - started) * 1000
            )
        except Exception as e:
            log.warning("maintenance failed (the stream goes on): %s", e, exc_info=True)
            self._record(
                failed=True,
                error=f"{type(e).__name__}: {e}",
                duration_ms=(time.perf_counter() - started) * 1000,
            )

    def _actions(self, m: Maintenance, lock: MaintenanceLock, protected: frozenset[str]) -> None:
        o = self.options
        if o.rewrite_data_files:
            r = m.rewrite_data_files(
                o.target_file_size_bytes, o.min_input_files, o.delete_file_threshold, max_attempts=1
            )
            self._bump(rewritten_data_files=r.rewritten_data_files)
            lock.renew()
            m.remove_dangling_deletes()
        if o.convert_equality_deletes:
            c = m.convert_equality_deletes()
            self._bump(converted_equality_delete_files=c.removed_equality_delete_files)
            lock.renew()
        if o.rewrite_manifests:
            m.rewrite_manifests()
            lock.renew()
        if o.expire_snapshots:
            older = None
            if o.max_snapshot_age_ms is not None:
                older = int(self._clock() * 1000) - o.max_snapshot_age_ms
            e = m.expire_snapshots(older, o.retain_last)
            self._bump(expired_snapshots=e.expired_snapshots)
            lock.renew()
        if o.remove_orphan_files:
            older = None
            if o.orphan_age_ms is not None:
                older = int(self._clock() * 1000) - o.orphan_age_ms
            m.remove_orphan_files(older, protected=protected)

    # --- metrics ---------------------------------------------------------------------------

    def _bump(self, **deltas: int) -> None:
        with self._mutex:
            m = self._metrics
            self._metrics = replace(m, **{k: getattr(m, k) + v for k, v in deltas.items()})

    def _record(
        self,
        *,
        failed: bool = False,
        conflict: bool = False,
        error: str | None = None,
        duration_ms: float | None = None,
    ) -> None:
        with self._mutex:
            m = self._metrics
            self._metrics = replace(
                m,
                runs=m.runs + 1,
                failures=m.failures + int(failed),
                conflicts=m.conflicts + int(conflict),
                last_duration_ms=duration_ms if duration_ms is not None else m.last_duration_ms,
                last_error=error if (failed or conflict) else m.last_error,
            )
