"""Maintenance inside a streaming sink (Flink's TableMaintenance), on the driver.

``after_commit(metadata)`` is called by the sink after each checkpoint's commits with
the table state they produced. When a trigger is due and no run is under way, a run
starts (in a background thread unless ``options.background`` is False): it takes the
table's maintenance lock (a run that cannot is skipped and retried; a table whose lock
needs a location and names none first gets one beside the sink's checkpoints), then runs the
enabled actions in order: compaction, dangling delete removal, equality-delete
conversion, manifest rewrite, snapshot expiry, old metadata file removal, orphan removal.

Why a background thread that races the sink, rather than running between the sink's
commits: a run between commits would add its time to a micro-batch (the stream's
latency), while every maintenance commit can retry cheaply against a concurrent one.
Expiry and metadata-file removal recompute from the refreshed table at each attempt
(expiry reuses the manifests it read); compaction and conversion validate against the
commits made since they planned (a position delete on a rewritten file makes compaction
yield and plan again, once per run).

Invariants:
- Never two runs of one sink at once; a due trigger during a run waits for the next
  commit after it.
- Every action runs even when an earlier one failed or yielded. A run that did not
  complete (a failure, a conflict, the lock held elsewhere) is retried after the next
  commit, backing off to every 64 commits while it keeps failing;
  ``metrics.consecutive_failures`` counts such runs in a row, ``metrics.failing`` is
  set from ``options.failures_before_alert`` of them, and ``report`` (when given) gets
  the metrics after every run (the sink writes them where ``stream-sink status`` reads).
- A run's work is bounded (``MaintenanceOptions``' per-run limits); a run that left
  work behind, or leaves the table over its backlog thresholds, makes the next commit
  start another (``metrics.backlog_runs`` counts them), so the schedule follows the
  backlog rather than a fixed count of commits.
- A failure never raises into the sink, and the sink never waits for a run (except
  ``close``); a failed run is logged at INFO, at WARNING when it turns persistent
  (``failures_before_alert`` in a row) and every 50th in a row after that.
- Runs use their own table handle: the sink's commits and the run race only through
  the catalog, where each commit validates (compaction yields, the sink does not).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from stream_sink.exceptions import CommitValidationError
from stream_sink.maintenance.actions import Maintenance
from stream_sink.maintenance.lease_lock import adopt_lock_location
from stream_sink.maintenance.lock import MaintenanceLock
from stream_sink.maintenance.options import MaintenanceOptions
from stream_sink.maintenance.triggers import TriggerState
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.table import Table

log = logging.getLogger(__name__)

COMPACTION_ATTEMPTS = 2
"""Plans per run: a compaction that conflicts is planned once more from the new head."""


class SinkMaintenance:
    """Runs ``options``' maintenance for one sink's table (see the module docstring).

    ``load_table`` gives a fresh handle of the table; ``owner`` names the lock's holder
    (stable per sink, so a restarted sink takes back the lease a killed run left);
    ``protected`` (called on the caller's thread when a run starts) names files the sink
    holds but has not committed. ``lock_location`` (``sink_lock_location``: beside the
    sink's checkpoints) is recorded as the table's lock location before a run when the
    table's lock needs one and the table names none (``adopt_lock_location``).

    ``trigger`` and ``metrics`` resume what an earlier instance of the same sink left
    (its ``trigger_state`` and ``metrics``): a sink whose every commit runs in a fresh
    process (:mod:`.per_commit`) builds one per commit from what the previous one saved.
    """

    def __init__(
        self,
        load_table: Callable[[], Table],
        options: MaintenanceOptions,
        owner: str,
        protected: Callable[[], frozenset[str]] | None = None,
        clock: Callable[[], float] = time.time,
        *,
        report: Callable[[MaintenanceMetricsSnapshot], None] | None = None,
        lock_location: str | None = None,
        trigger: TriggerState | None = None,
        metrics: MaintenanceMetricsSnapshot | None = None,
    ) -> None:
        self._load_table = load_table
        self._lock_location = lock_location
        self.options = options
        self._owner = owner
        self._protected = protected
        self._clock = clock
        self._report = report
        self._trigger = (
            TriggerState(options, last_run_ms=int(clock() * 1000))
            if trigger is None
            else replace(trigger, options=options)
        )
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()
        self._metrics = metrics if metrics is not None else MaintenanceMetricsSnapshot()

    @property
    def metrics(self) -> MaintenanceMetricsSnapshot:
        with self._mutex:
            return self._metrics

    @property
    def trigger_state(self) -> TriggerState:
        """A copy of what the triggers counted since the last run (to resume from)."""
        with self._mutex:
            return replace(self._trigger)

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
            self._record(failed=True, error=f"trigger: {e}", completed=False)
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
        """One run now on the calling thread (errors logged and counted, never raised).

        Each enabled action runs even when an earlier one failed or yielded; the run
        completes when all of them did, else it is retried (see ``after_commit``)."""
        started = time.perf_counter()
        outcome = _Outcome()
        try:
            table = adopt_lock_location(self._load_table(), self._lock_location)
            lock = MaintenanceLock.for_table(
                table, self._owner, self.options.lock_lease_ms, owner=self._owner
            )
            if not lock.try_acquire():
                log.info(
                    "table %s: maintenance skipped, lock held by %s", table.name, lock.holder()
                )
                self._bump(skipped_locked=1)
                self._finish(_Outcome(skipped=True), started)
                return
            try:
                self._actions(Maintenance(table), lock, protected, outcome)
            finally:
                lock.release()
        except Exception as e:
            outcome.fail("run", e)
        self._finish(outcome, started)

    def _actions(
        self,
        m: Maintenance,
        lock: MaintenanceLock,
        protected: frozenset[str],
        outcome: _Outcome,
    ) -> None:
        o = self.options
        for enabled, name, action in (
            (o.rewrite_data_files, "rewrite_data_files", lambda: self._compact(m, outcome)),
            (
                o.convert_equality_deletes,
                "convert_equality_deletes",
                lambda: self._convert(m, outcome),
            ),
            (o.rewrite_manifests, "rewrite_manifests", m.rewrite_manifests),
            (o.expire_snapshots, "expire_snapshots", lambda: self._expire(m)),
            (
                o.remove_old_metadata_files,
                "remove_old_metadata_files",
                lambda: self._meta(m, outcome),
            ),
            (o.remove_orphan_files, "remove_orphan_files", lambda: self._orphans(m, protected)),
        ):
            if not enabled:
                continue
            try:
                action()
            except CommitValidationError as e:
                outcome.yielded(name, e)
            except Exception as e:
                outcome.fail(name, e)
            lock.renew()
        outcome.backlog = outcome.backlog or self._over_thresholds(m)

    def _over_thresholds(self, m: Maintenance) -> bool:
        """The table holds more live files than the options' backlog thresholds."""
        o = self.options
        if o.backlog_data_files is None and o.backlog_delete_files is None:
            return False
        try:
            m.table.refresh()
            snap = m.table.current_snapshot()
        except Exception:  # the thresholds only bring a run forward
            return False
        if snap is None:
            return False
        totals = snap.summary
        data = int(totals.get("total-data-files", "0"))
        deletes = int(totals.get("total-delete-files", "0"))
        return (o.backlog_data_files is not None and data > o.backlog_data_files) or (
            o.backlog_delete_files is not None and deletes > o.backlog_delete_files
        )

    def _compact(self, m: Maintenance, outcome: _Outcome) -> None:
        o = self.options
        r = m.rewrite_data_files(
            o.target_file_size_bytes,
            o.min_input_files,
            o.delete_file_threshold,
            max_attempts=COMPACTION_ATTEMPTS,
            max_files=o.max_rewrite_files_per_run,
            max_bytes=o.max_rewrite_bytes_per_run,
        )
        outcome.backlog |= r.remaining_files > 0
        self._bump(rewritten_data_files=r.rewritten_data_files)
        m.remove_dangling_deletes()

    def _convert(self, m: Maintenance, outcome: _Outcome) -> None:
        c = m.convert_equality_deletes(max_files=self.options.max_equality_delete_files_per_run)
        outcome.backlog |= c.remaining_equality_delete_files > 0
        self._bump(converted_equality_delete_files=c.removed_equality_delete_files)

    def _expire(self, m: Maintenance) -> None:
        o = self.options
        older = None
        if o.max_snapshot_age_ms is not None:
            older = int(self._clock() * 1000) - o.max_snapshot_age_ms
        e = m.expire_snapshots(older, o.retain_last)
        self._bump(expired_snapshots=e.expired_snapshots)

    def _meta(self, m: Maintenance, outcome: _Outcome) -> None:
        r = m.remove_old_metadata_files(self.options.max_metadata_files_per_run)
        outcome.backlog |= r.remaining > 0
        self._bump(removed_metadata_files=r.removed)

    def _orphans(self, m: Maintenance, protected: frozenset[str]) -> None:
        o = self.options
        older = None
        if o.orphan_age_ms is not None:
            older = int(self._clock() * 1000) - o.orphan_age_ms
        m.remove_orphan_files(older, protected=protected)

    def _finish(self, outcome: _Outcome, started: float) -> None:
        """Count the run; a run that did not complete leaves a retry standing."""
        duration_ms = (time.perf_counter() - started) * 1000
        done = outcome.completed
        with self._mutex:
            self._trigger.retry_failures = 0 if done else self._trigger.retry_failures + 1
            self._trigger.backlog = done and outcome.backlog
            if done and outcome.backlog:
                self._metrics = replace(self._metrics, backlog_runs=self._metrics.backlog_runs + 1)
            in_a_row = self._trigger.retry_failures
        if outcome.failed_action is not None:
            alert = self.options.failures_before_alert
            loud = in_a_row == alert or (in_a_row > alert and in_a_row % 50 == 0)
            log.log(
                logging.WARNING if loud else logging.INFO,
                "maintenance of %s: %s failed (%d in a row; retried after %d commits): %s",
                self._owner,
                outcome.failed_action,
                in_a_row,
                self._trigger.retry_backoff(),
                outcome.error,
            )
        elif outcome.conflict:
            log.info("maintenance yielded to a concurrent commit: %s", outcome.error)
        self._record(
            failed=outcome.failed_action is not None,
            conflict=outcome.conflict,
            error=outcome.error,
            duration_ms=duration_ms,
            completed=done,
            skipped=outcome.skipped,
        )
        if self._report is not None:
            try:
                self._report(self.metrics)
            except Exception as e:  # a report that cannot be written never fails a run
                log.warning("maintenance report of %s not written: %s", self._owner, e)

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
        completed: bool = True,
        skipped: bool = False,
    ) -> None:
        with self._mutex:
            m = self._metrics
            in_a_row = self._trigger.retry_failures
            self._metrics = replace(
                m,
                runs=m.runs + int(not skipped),
                failures=m.failures + int(failed),
                conflicts=m.conflicts + int(conflict),
                last_duration_ms=duration_ms if duration_ms is not None else m.last_duration_ms,
                last_error=error if (failed or conflict) else m.last_error,
                consecutive_failures=in_a_row,
                failing=in_a_row >= self.options.failures_before_alert,
                last_success_ms=int(self._clock() * 1000) if completed else m.last_success_ms,
            )


@dataclass
class _Outcome:
    """What one run's actions did: the first failure and whether any yielded."""

    failed_action: str | None = None
    error: str | None = None
    conflict: bool = False
    skipped: bool = False
    backlog: bool = False
    """An action left work for a later run (its per-run bound), or the table is over
    the options' backlog thresholds."""

    @property
    def completed(self) -> bool:
        return self.failed_action is None and not self.conflict and not self.skipped

    def fail(self, action: str, e: Exception) -> None:
        if self.failed_action is None:
            self.failed_action, self.error = action, f"{action}: {type(e).__name__}: {e}"

    def yielded(self, action: str, e: Exception) -> None:
        self.conflict = True
        if self.error is None:
            self.error = f"{action}: {e}"
