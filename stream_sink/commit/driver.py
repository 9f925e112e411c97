"""The one driver of the commit protocol, for one table or the tables of a routed batch.

Every front door (``IcebergSink``, ``DeltaSink``, the router, both ``format("stream_sink")``
routes) turns the engine's calls into these, and only this module calls the
committer's protocol steps (``tests/architecture`` checks it):

- :meth:`CommitDriver.open`: ``restore`` one table's committer: the loss checks against
  the batches upstream acknowledged, then what a crash left staged or pending is
  committed (or dropped as a replay the table already holds). With ``defer_commit``
  (tables that commit together) it is kept instead, and :meth:`CommitDriver.commit_restored`
  commits every table's at once once all are open.
- :meth:`CommitDriver.record`: ``process`` each table's result of a batch (durable in
  the operator state on return); when the coordinator says a checkpoint is due,
  :meth:`checkpoint`.
- :meth:`CommitDriver.checkpoint`: for every table with work, ``snapshot_state`` then
  ``complete_checkpoint`` (phase 1: staged and durable), then phase 2
  (``notify_checkpoint_complete``: the table commits) through the
  :class:`~.schedule.CommitSchedule`, then the ``after_checkpoint`` hook with what
  was committed: each table's handle as its target committed it (maintenance, route
  log).
- With ``commit_together`` (a routed sink on a catalog that commits several tables in one
  transaction): phase 2 of a checkpoint of several tables plans each table's commit
  (``plan_checkpoint``), commits every snapshot but each table's last one table by
  table (``commit_leading``), hands the last ones to ``commit_together`` at once, and
  gives each table what its commit returned (``finish_checkpoint``).
- :meth:`CommitDriver.end_input`, :meth:`CommitDriver.close`, :meth:`CommitDriver.metrics`.
- :meth:`CommitDriver.drain`: wait for the commit in flight (a pipelined schedule); a
  front door calls it before it reads a table the commit changes (a Delta MERGE's file
  search, the route log).

Invariants: a batch is recorded in every table it wrote before :meth:`record` returns
(so upstream may acknowledge it); tables are visited in name order, each under its own
operator id and watermark, so a crash between two tables' commits leaves each table
exact (see ``docs/design.md``); the schedule is drained before the driver changes state
again (``open``, ``record``, ``checkpoint``, ``end_input``, ``close``, ``holds``), so a
committer is never used by two threads, and a commit that failed in the background is
raised there. ``watermark`` and ``metrics`` do not wait: with a commit in flight they
report what is committed so far.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Generic

from stream_sink.checkpoints import CheckpointCoordinator
from stream_sink.metrics.committer import CommitterMetricsSnapshot

from .committer import FilesCommitter
from .failpoints import AFTER_DATA_FILES, failpoint
from .loss_check import HadInput
from .schedule import CommitSchedule, Synchronous
from .shapes import CommitGroup
from .target import BatchFiles, Handle

log = logging.getLogger(__name__)

AfterCheckpoint = Callable[[Mapping[str, Handle]], None]
"""Called after each checkpoint's commits with what it committed: the tables by name (in
name order), each the handle its target committed through (``CommitTarget.committed``)."""

TogetherPart = tuple[str, FilesCommitter, CommitGroup]
"""A table's name, its committer and the snapshot (commit group) to commit with others'."""
CommitTogether = Callable[[Sequence[TogetherPart]], Mapping[str, "int | None"]]
"""Commits several tables' groups at once; per table name what
:meth:`~.target.CommitTarget.commit` returns (None: committed; else the watermark that
refused it). The Iceberg one: :func:`stream_sink.commit.iceberg.multi_table.commit_together`."""


class CommitDriver(Generic[Handle]):
    """Drives the :class:`~.committer.FilesCommitter` of each of its tables (see module).

    ``coordinator`` says when a checkpoint is due; ``schedule`` when its table commits
    run (default :class:`~.schedule.Synchronous`); ``clock`` returns seconds. ``Handle``
    is the tables' format handle the ``after_checkpoint`` hook receives.
    """

    def __init__(
        self,
        coordinator: CheckpointCoordinator | None = None,
        *,
        schedule: CommitSchedule | None = None,
        after_checkpoint: AfterCheckpoint[Handle] | None = None,
        commit_together: CommitTogether | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.coordinator = coordinator or CheckpointCoordinator()
        self._schedule: CommitSchedule = schedule or Synchronous()
        self._after_checkpoint = after_checkpoint
        self._together = commit_together
        self._clock = clock
        self._committers: dict[str, FilesCommitter[Handle]] = {}

    # --- tables ------------------------------------------------------------------------

    def open(
        self,
        name: str,
        committer: FilesCommitter[Handle],
        acknowledged: Iterable[int] | None,
        had_input: HadInput | None = None,
        *,
        defer_commit: bool = False,
    ) -> FilesCommitter[Handle]:
        """Restore ``committer`` as table ``name`` (loss checks against ``acknowledged``,
        of which ``had_input`` tells those that read input; then what its state holds is
        finished, or with ``defer_commit`` kept for :meth:`commit_restored`); closed again
        when that fails."""
        self._schedule.drain()
        try:
            committer.restore(
                acknowledged_batch_ids=acknowledged,
                had_input=had_input,
                defer_commit=defer_commit,
            )
        except BaseException:
            committer.close()
            raise
        self._committers[name] = committer
        log.info(
            "table %s (sink %s): restored, watermark %d",
            name,
            committer.operator_id,
            committer.watermark,
        )
        return committer

    def commit_restored(self, acknowledged: Iterable[int]) -> dict[str, Handle]:
        """Commit what the tables opened with ``defer_commit`` kept, as one checkpoint (in
        one transaction with ``commit_together``); returns what was committed, as the
        ``after_checkpoint`` hook receives it (which is not called: the caller is still
        opening).

        The checkpoint goes through the newest batch upstream ``acknowledged`` or any
        table staged: each such batch is recorded in every table it wrote (a batch is
        acknowledged, and its checkpoint staged, only once every table recorded it), so
        committing them leaves the tables agreeing. A batch above it was recorded by some
        tables only before a crash; upstream runs it again, the tables that hold it drop
        the replay, and the checkpoint after it commits it everywhere at once."""
        self._schedule.drain()
        staged = (c for cm in self._committers.values() for c in cm.staged_checkpoints)
        through = max([*acknowledged, *staged], default=None)
        if through is None:
            return {}
        names = tuple(n for n in self.names if _holds_through(self._committers[n], through))
        for name in names:
            committer = self._committers[name]
            committer.snapshot_state(through)
            committer.complete_checkpoint(through)
        if names:
            self._commit(through, names, hook=False)
            log.info("restored tables %s: committed through batch %d", ", ".join(names), through)
        return {n: self._committers[n].target.committed for n in names}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._committers))

    def record_skipped(self, batch_ids: Iterable[int], upstream: str | None = None) -> None:
        """Note in every table's state that upstream ran ``batch_ids`` without handing them
        to the sink (see :meth:`FilesCommitter.record_skipped`)."""
        self._schedule.drain()
        ids = tuple(batch_ids)
        for name in self.names:
            self._committers[name].record_skipped(ids, upstream)

    def committer(self, name: str) -> FilesCommitter[Handle]:
        return self._committers[name]

    def watermark(self, name: str) -> int:
        return self._committers[name].watermark

    def watermarks(self) -> dict[str, int]:
        return {name: c.watermark for name, c in self._committers.items()}

    def holds(self, name: str, batch_id: int) -> bool:
        """True when table ``name`` has ``batch_id`` (committed, staged or pending)."""
        self._schedule.drain()
        return self._committers[name].holds(batch_id)

    # --- batches and checkpoints ------------------------------------------------------------

    def drain(self) -> None:
        """Wait for the commit in flight, if any (raising its failure): the tables are
        then as the last checkpoint left them."""
        self._schedule.drain()

    def record(self, batch_id: int, results: Mapping[str, BatchFiles]) -> bool:
        """Record ``batch_id``'s result in each named table (durable on return; a replay's
        new files are deleted), then take the checkpoint when one is due. True when
        any table took the batch as new."""
        self._schedule.drain()
        failpoint(AFTER_DATA_FILES)
        new = False
        for name in sorted(results):
            new |= self._committers[name].process(batch_id, results[name])
        now_ms = int(self._clock() * 1000)
        if new and self.coordinator.on_batch(batch_id, now_ms):
            self.checkpoint(batch_id)
        return new

    def checkpoint(self, checkpoint_id: int) -> tuple[str, ...]:
        """Stage and durably checkpoint every table with work (phase 1), then commit
        them (phase 2, through the schedule). Returns the tables checkpointed."""
        self._schedule.drain()
        names = tuple(n for n in self.names if _has_work(self._committers[n]))
        for name in names:
            committer = self._committers[name]
            committer.snapshot_state(checkpoint_id)
            committer.complete_checkpoint(checkpoint_id)
        self._schedule.submit(checkpoint_id, lambda: self._commit(checkpoint_id, names))
        return names

    def _commit(self, checkpoint_id: int, names: tuple[str, ...], *, hook: bool = True) -> None:
        if self._together is not None and len(names) > 1:
            self._commit_together(self._together, checkpoint_id, names)
        else:
            for name in names:
                self._committers[name].notify_checkpoint_complete(checkpoint_id)
        if hook and self._after_checkpoint is not None:
            self._after_checkpoint({n: self._committers[n].target.committed for n in names})

    def _commit_together(
        self, together: CommitTogether, checkpoint_id: int, names: tuple[str, ...]
    ) -> None:
        """Phase 2 of ``names`` with each table's last snapshot committed at once."""
        planned = {}
        for name in names:
            plan = self._committers[name].plan_checkpoint(checkpoint_id)
            if plan is not None:
                planned[name] = plan
        for name, plan in planned.items():
            self._committers[name].commit_leading(plan)
        parts = [(n, self._committers[n], p.groups[-1]) for n, p in planned.items() if p.groups]
        results = together(parts) if parts else {}
        for name, plan in planned.items():
            refused_at = results[name] if plan.groups else None  # every part is answered
            self._committers[name].finish_checkpoint(plan, refused_at)

    def end_input(self) -> None:
        """Checkpoint and commit every batch not yet committed (end of input or stop)."""
        self._schedule.drain()
        ckpt = self.coordinator.force(int(self._clock() * 1000))
        if ckpt is not None:
            self.checkpoint(ckpt)
            self._schedule.drain()
        for name in self.names:
            end_input(self._committers[name])

    # --- metrics and close -------------------------------------------------------------------

    def metrics(self) -> dict[str, CommitterMetricsSnapshot]:
        """Each table's committer metrics now, with the schedule's (commits in flight,
        time waited for them)."""
        waits = self._schedule.metrics()
        return {
            name: replace(
                c.metrics.snapshot(),
                commits_in_flight=waits.commits_in_flight,
                last_commit_wait_ms=waits.last_commit_wait_ms,
                commit_wait_ms_total=waits.commit_wait_ms_total,
            )
            for name, c in self._committers.items()
        }

    def close(self) -> None:
        """Release every table's state (a commit in flight finishes first); staged work
        stays durable and is committed by the next ``open``. Never raises: a failure
        to close is logged (it must not hide the error that led here)."""
        try:
            self._schedule.drain()
        except Exception as e:
            log.warning("a commit failed while closing: %s (the next restore finishes it)", e)
        committers, self._committers = self._committers, {}
        for name, committer in committers.items():
            try:
                committer.close()
            except Exception as e:
                log.warning("table %s: closing the operator state failed: %s", name, e)


def _has_work(committer: FilesCommitter) -> bool:
    return bool(committer.pending_batch_ids or committer.staged_checkpoints)


def _holds_through(committer: FilesCommitter, batch_id: int) -> bool:
    """Whether ``committer`` holds a batch or staged checkpoint at or below ``batch_id``."""
    return any(b <= batch_id for b in committer.pending_batch_ids) or any(
        c <= batch_id for c in committer.staged_checkpoints
    )


def end_input(committer: FilesCommitter) -> None:
    """Bounded input ended for ``committer``: checkpoint its pending batches and commit
    every staged checkpoint (the bounded job's last checkpoint)."""
    pending = committer.pending_batch_ids
    if pending:
        committer.snapshot_state(pending[-1])
        committer.complete_checkpoint(pending[-1])
    staged = committer.staged_checkpoints
    if staged:
        committer.notify_checkpoint_complete(max(staged))
