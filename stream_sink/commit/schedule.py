"""When a checkpoint's table commit runs: synchronously, or pipelined with the next batch.

The driver (:mod:`.driver`) runs phase 1 of a checkpoint itself (``snapshot_state`` and
``complete_checkpoint``: the batches are staged and durable) and hands phase 2 (the
table commits, ``notify_checkpoint_complete``, then the after-checkpoint hook) to a
:class:`CommitSchedule`:

- :class:`Synchronous` (the default) runs phase 2 at once, so a micro-batch returns
  with its table commit done.
- :class:`Pipelined` returns as soon as the batch is staged and runs the commit on a
  background thread while the next batch writes, as Flink's committer commits in
  ``notifyCheckpointComplete`` after the checkpoint is durable.

Invariants every schedule keeps, which the driver relies on:

- at most one commit in flight: ``submit`` waits for the previous one first;
- a failed commit surfaces in the next call of the driver (``drain`` raises it), so the
  query stops on the batch after, never silently;
- ``drain`` before the driver changes state again (a table opened, a new batch, a
  checkpoint, end of input, close), so the committer is never used by two threads at
  once;
- nothing needs saving on a crash: the staged checkpoint is durable in the operator
  state, and ``restore`` commits what was staged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from stream_sink.exceptions import InvalidOptionError

log = logging.getLogger(__name__)

ScheduleName = Literal["synchronous", "pipelined"]
SCHEDULES: tuple[ScheduleName, ...] = ("synchronous", "pipelined")
"""The values of the front doors' ``commit_mode`` option (``"synchronous"`` the default)."""


@dataclass(frozen=True)
class ScheduleMetricsSnapshot:
    """What a schedule reports: the commits in flight now (0 or 1), how long the driver's
    last call waited for the commit in flight (None before any wait) and in all, in ms."""

    commits_in_flight: int = 0
    last_commit_wait_ms: float | None = None
    commit_wait_ms_total: float = 0.0


class CommitSchedule(Protocol):
    """Runs the table commits (phase 2) of the checkpoints the driver staged."""

    def submit(self, checkpoint_id: int, commit: Callable[[], None]) -> None:
        """Run ``commit`` (phase 2 of ``checkpoint_id``), now or later."""

    def drain(self) -> None:
        """Wait for the commit in flight, if any; raise its failure."""

    def metrics(self) -> ScheduleMetricsSnapshot:
        """Commits in flight and the time waited for them (safe from any thread)."""


class Synchronous:
    """Phase 2 runs inside ``submit``: the batch returns with its table commit done."""

    def submit(self, checkpoint_id: int, commit: Callable[[], None]) -> None:
        commit()

    def drain(self) -> None:
        return None

    def metrics(self) -> ScheduleMetricsSnapshot:
        return ScheduleMetricsSnapshot()


class Pipelined:
    """Phase 2 on a background thread; the driver's next call waits for it (``drain``).

    One thread per commit, started by ``submit`` after the previous one has ended. The
    thread is not a daemon: a process that exits normally finishes the commit in flight
    first; a process that is killed leaves the checkpoint staged, and the next ``restore``
    commits it. A failure is logged on the commit's thread and raised by the next
    ``drain`` (or ``submit``), with a note naming the checkpoint. ``clock`` returns
    seconds (for the wait metrics).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._checkpoint: int | None = None
        self._failure: BaseException | None = None
        self._last_wait_ms: float | None = None
        self._wait_ms_total = 0.0

    def submit(self, checkpoint_id: int, commit: Callable[[], None]) -> None:
        self.drain()
        thread = threading.Thread(
            target=self._run,
            args=(checkpoint_id, commit),
            name=f"stream-sink-commit-{checkpoint_id}",
        )
        with self._lock:
            self._thread, self._checkpoint = thread, checkpoint_id
        thread.start()

    def _run(self, checkpoint_id: int, commit: Callable[[], None]) -> None:
        try:
            commit()
        except BaseException as e:
            log.warning(
                "the table commit of checkpoint %d failed in the background: %s (raised at "
                "the next batch; the checkpoint stays staged)",
                checkpoint_id,
                e,
            )
            self._failure = e  # read by drain after join: the join orders the two

    def drain(self) -> None:
        thread = self._thread
        if thread is not None:
            started = self._clock()
            thread.join()
            waited = (self._clock() - started) * 1000
            with self._lock:
                self._thread = None
                self._last_wait_ms = waited
                self._wait_ms_total += waited
        failure, self._failure = self._failure, None
        if failure is not None:
            add_note = getattr(failure, "add_note", None)  # Python 3.11+
            if add_note is not None:
                add_note(_failure_note(self._checkpoint))
            raise failure

    def metrics(self) -> ScheduleMetricsSnapshot:
        with self._lock:
            thread = self._thread
            return ScheduleMetricsSnapshot(
                commits_in_flight=int(thread is not None and thread.is_alive()),
                last_commit_wait_ms=self._last_wait_ms,
                commit_wait_ms_total=self._wait_ms_total,
            )


def _failure_note(checkpoint_id: int | None) -> str:
    return (
        f"stream_sink: raised by the table commit of checkpoint {checkpoint_id}, which ran "
        "in the background (commit_mode='pipelined') while the next batch was written; "
        "its batches stay staged in the operator state and are committed exactly once "
        "when the query restarts"
    )


COMMIT_MODES_HINT = (
    "expected 'synchronous' (the default: a micro-batch returns with its table commit "
    "done) or 'pipelined' (it returns once its files are durably staged; the table "
    "commit runs while the next batch writes)"
)


def check_commit_mode(commit_mode: object, *, where: str) -> ScheduleName:
    """``commit_mode`` when it names a schedule; InvalidOptionError naming ``where``
    and the accepted values otherwise."""
    if commit_mode == "synchronous":
        return "synchronous"
    if commit_mode == "pipelined":
        return "pipelined"
    raise InvalidOptionError(f"{where}: commit_mode={commit_mode!r}: {COMMIT_MODES_HINT}")


def schedule_for(commit_mode: ScheduleName) -> CommitSchedule:
    """A new schedule of ``commit_mode`` (one per commit driver)."""
    if check_commit_mode(commit_mode, where="schedule") == "pipelined":
        return Pipelined()
    return Synchronous()
