"""Refusing to start when upstream acknowledged batches that nothing can bring back.

Upstream (Spark's commit log) acknowledges a batch once ``process`` returned for it. On
every restore each acknowledged batch must be *accounted for*: at or below the table's
watermark for the job, at or below the batch the state records as covered (empty batches
commit no snapshot, so only the state remembers them), or pending or staged in the state.
Anything else was recorded only in a state that is gone: lost (state missing or
corrupt) or newer than the copy being restored (a stale state directory). Both refuse
to start, naming the batches, before anything is changed.

Invariant: the covered record is written in the same atomic state write that forgets
the committed checkpoints, so it never claims a batch the table does not hold.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from stream_sink.checkpoints import CompletedCheckpoint
from stream_sink.exceptions import DataLossError
from stream_sink.state import OperatorStateBackend

from .watermark import INITIAL_WATERMARK

META_COVERED = "covered-batch-id"
"""State metadata: ``<job id>:<batch id>``, the highest batch of that job whose
checkpoint was committed (with or without a snapshot) and forgotten."""


def encode_covered(job_id: str, batch_id: int) -> bytes:
    return f"{job_id}:{batch_id}".encode()


def covered_batch(backend: OperatorStateBackend, job_id: str) -> int:
    """The covered batch the state records for ``job_id`` (-1 when none or another job)."""
    raw = backend.get_meta(META_COVERED)
    if not raw:
        return INITIAL_WATERMARK
    job, _, batch = raw.decode("utf-8").rpartition(":")
    if job != job_id or not batch.lstrip("-").isdigit():
        return INITIAL_WATERMARK
    return int(batch)


@dataclass(frozen=True)
class Accounting:
    """What a restore can account for, for one job."""

    sink_id: str
    table_name: str
    job_id: str
    watermark: int
    covered: int
    known: Collection[int]

    def unaccounted(self, acknowledged: Sequence[int]) -> list[int]:
        above = max(self.watermark, self.covered)
        return [b for b in acknowledged if b > above and b not in self.known]


def check_stale_state(accounting: Accounting, location: str, acknowledged: Sequence[int]) -> None:
    """Intact state: refuse when it does not account for an acknowledged batch."""
    lost = accounting.unaccounted(acknowledged)
    if not lost:
        return
    a = accounting
    raise DataLossError(
        f"sink {a.sink_id} (table {a.table_name}, job {a.job_id}): the operator state at "
        f"{location} does not hold acknowledged batches {lost}: the table's watermark is "
        f"{a.watermark}, the state records batches up to {max(a.covered, a.watermark)} as "
        "committed, and those batches are neither pending nor staged in it. The state is "
        "older than the run that processed them (a stale copy put back?), and their files "
        "were only recorded in the newer state. Nothing was changed: put back the newest "
        "state directory, or replay those batches from the source under a new query, "
        "before restarting"
    )


def check_lost_state(
    accounting: Accounting,
    location: str,
    checkpoint: CompletedCheckpoint | None,
    acknowledged: Sequence[int],
) -> None:
    """Lost state: refuse when neither the watermark nor the checkpoint about to be
    restored accounts for an acknowledged batch."""
    covered = accounting.watermark
    if checkpoint is not None and checkpoint.metadata.job_id == accounting.job_id:
        covered = max(covered, checkpoint.metadata.last_batch_id)
    lost = [b for b in acknowledged if b > covered]
    if not lost:
        return
    a = accounting
    source = (
        f"newest completed checkpoint: {checkpoint.checkpoint_id} at {checkpoint.location}"
        if checkpoint is not None
        else "no completed checkpoint to restore"
    )
    raise DataLossError(
        f"sink {a.sink_id} (table {a.table_name}, job {a.job_id}): the operator state at "
        f"{location} is missing or corrupt ({source}); upstream already acknowledged "
        f"batches {lost} that the table's watermark ({a.watermark}) does not cover, and "
        "their files were only recorded in the lost state. Nothing was changed: restore "
        "the state directory, or replay those batches from the source under a new query, "
        "before restarting"
    )
