"""The driver's hold of source transactions across micro-batches: each batch is split
against the hold durable in the operator state, and the new hold made durable before
the batch's committed rows go anywhere.

Per batch ``b`` (the caller's order, which exactly once rests on):

1. :meth:`TransactionBuffer.split`: the hold from before ``b`` (:meth:`.store.HoldStore.before`)
   and ``b``'s rows and END events give the rows to commit and the new hold
   (:func:`.split.split_batch`); a re-run of ``b`` reuses the first run's time, so it
   splits the same way.
2. :meth:`TransactionBuffer.record`: the new hold is written (one atomic, durable state
   write; failpoint ``after-held-write``), forced-out transactions are logged as
   WARNINGs and counted (a re-run of ``b`` is not counted again), the gauges updated.
3. The caller writes the rows to commit and records them in each table's committer.

A crash before 2 leaves the old hold and no table with ``b``; a crash between 2 and 3,
or inside 3, leaves the new hold version beside the old one, and Spark's re-run of
``b`` starts again from the old one: each table that had recorded ``b`` drops the
re-run as a replay and the others record the same rows. So every change row is
committed once, with the batch that completes its transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import pyarrow as pa

from stream_sink.failpoints import AFTER_HELD_WRITE, failpoint
from stream_sink.metrics.transactions import TransactionMetrics
from stream_sink.state import OperatorStateBackend

from .bound import HoldBound, warn_forced
from .held import HeldTransactions
from .markers import TransactionMarker
from .split import Split, TransactionColumns, split_batch
from .store import HoldStore


class TransactionBuffer:
    """Holds the open source transactions of sink ``sink`` in ``state`` (see module).
    ``clock`` returns seconds."""

    def __init__(
        self,
        state: OperatorStateBackend,
        *,
        sink: str,
        bound: HoldBound | None = None,
        columns: TransactionColumns | None = None,
        metrics: TransactionMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = HoldStore(state)
        self.sink = sink
        self.bound = bound or HoldBound()
        self.columns = columns or TransactionColumns()
        self.metrics = metrics or TransactionMetrics()
        self._clock = clock
        self._gauges(self.store.latest())  # a restart shows what the state holds

    def split(self, batch_id: int, rows: pa.Table, ends: Iterable[TransactionMarker]) -> Split:
        """Step 1: what ``batch_id`` commits and holds; changes nothing."""
        start = self.store.before(batch_id)
        again = self.store.decided_at(batch_id)
        now_ms = again if again is not None else int(self._clock() * 1000)
        return split_batch(
            rows,
            ends,
            start,
            batch_id=batch_id,
            now_ms=now_ms,
            bound=self.bound,
            columns=self.columns,
        )

    def record(self, batch_id: int, split: Split) -> None:
        """Step 2: make ``split``'s hold durable, then report it (counted once per
        batch: a re-run splits the same way, and its transactions were counted)."""
        again = self.store.has_version(batch_id)
        self.store.save(batch_id, split.held)
        failpoint(AFTER_HELD_WRITE)
        for forced in split.forced:
            warn_forced(self.sink, forced, batch_id)
        if not again:
            self.metrics.committed(len(split.completed), len(split.forced))
        self._gauges(split.held)

    def held(self) -> HeldTransactions:
        """What is held now (the newest version)."""
        return self.store.latest()

    def _gauges(self, hold: HeldTransactions) -> None:
        oldest = min((t.first_batch for t in hold.open.values()), default=None)
        self.metrics.held(len(hold.open), hold.row_count, oldest)
