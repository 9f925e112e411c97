"""When a checkpoint's table commit runs: the seam for a pipelined commit.

The driver (:mod:`.driver`) runs phase 1 of a checkpoint itself (``snapshot_state`` and
``complete_checkpoint``: the batches are staged and durable) and hands phase 2 (the
table commits, ``notify_checkpoint_complete``) to a :class:`CommitSchedule`.

:class:`Synchronous` (the only schedule today) runs phase 2 at once, so a micro-batch
returns with its table commit done. A pipelined schedule would return as soon as the
batch is staged and run the commit while the next batch writes; it must keep these
invariants, which the driver relies on:

- at most one commit in flight: ``submit`` waits for the previous one first;
- a failed commit surfaces in the next call of the driver (``drain`` raises it), so the
  query stops on the batch after, never silently;
- ``drain`` before the driver changes state again (a new batch, a checkpoint, end of
  input, close), so the committer is never used by two threads at once;
- nothing needs saving on a crash: the staged checkpoint is durable in the operator
  state, and ``restore`` commits what was staged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class CommitSchedule(Protocol):
    """Runs the table commits (phase 2) of the checkpoints the driver staged."""

    def submit(self, checkpoint_id: int, commit: Callable[[], None]) -> None:
        """Run ``commit`` (phase 2 of ``checkpoint_id``), now or later."""

    def drain(self) -> None:
        """Wait for the commit in flight, if any; raise its failure."""


class Synchronous:
    """Phase 2 runs inside ``submit``: the batch returns with its table commit done."""

    def submit(self, checkpoint_id: int, commit: Callable[[], None]) -> None:
        commit()

    def drain(self) -> None:
        return None
