"""Refusing to start when upstream acknowledged batches that nothing can bring back.

Upstream (Spark's commit log) acknowledges a batch once ``process`` returned for it. On
every restore each acknowledged batch must be *accounted for*: at or below the table's
watermark for the job, at or below the batch the state records as covered (empty batches
commit no snapshot, so only the state remembers them), or pending or staged in the state.
A batch that read no input (Spark's no-data batches, which only move an event-time
watermark) is accounted for whatever the sink saw of it: it has nothing to lose.
Anything else was either never handed to the sink (a ``foreachBatch`` function that
returned without calling it), or recorded only in a state that is gone: lost (state
missing or corrupt) or newer than the copy being restored (a stale state directory).
All refuse to start, naming the batches, before anything is changed; batches the front
door saw skipped (recorded in the state as such, :data:`META_SKIPPED`) are named as
skipped, with how to run them again.

Invariants: the covered record is written in the same atomic state write that forgets
the committed checkpoints, so it never claims a batch the table does not hold; a
skipped record only names batches upstream acknowledged that the sink never recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from stream_sink.checkpoints import CompletedCheckpoint
from stream_sink.exceptions import DataLossError, SkippedBatchError
from stream_sink.state import OperatorStateBackend

from .target import INITIAL_WATERMARK

META_COVERED = "covered-batch-id"
"""State metadata: ``<job id>:<batch id>``, the highest batch of that job whose
checkpoint was committed (with or without a snapshot) and forgotten."""


META_SKIPPED = "skipped-batch-ids"
"""State metadata: JSON ``{"job", "batches", "upstream"}``, batches of that job upstream
acknowledged that never reached the sink (seen by the front door) and where upstream
logs them (Spark's checkpoint location), for :func:`skipped_batch_error`."""

HadInput = Callable[[int], bool]
"""Whether upstream's batch ``batch_id`` read any input (True when it cannot tell)."""


@dataclass(frozen=True)
class Skipped:
    """Batches of job ``job_id`` upstream ran without handing them to the sink."""

    job_id: str
    batch_ids: frozenset[int] = frozenset()
    upstream: str | None = None

    def to_bytes(self) -> bytes:
        doc = {"job": self.job_id, "batches": sorted(self.batch_ids), "upstream": self.upstream}
        return json.dumps(doc).encode()


def skipped_batches(backend: OperatorStateBackend, job_id: str) -> Skipped:
    """The skipped batches the state records for ``job_id`` (none for another job, or
    for a record that does not parse: it only words an error)."""
    raw = backend.get_meta(META_SKIPPED)
    try:
        doc = json.loads(raw) if raw else {}
        if doc.get("job") != job_id:
            return Skipped(job_id)
        return Skipped(job_id, frozenset(int(b) for b in doc["batches"]), doc.get("upstream"))
    except (ValueError, TypeError, KeyError, AttributeError):
        return Skipped(job_id)


def skipped_batch_error(
    sink_id: str, table_name: str, batch_ids: Sequence[int], spark_location: str | None = None
) -> SkippedBatchError:
    """The error for batches upstream ran that never reached the sink: what happened,
    what it means for the table, and how to run them again."""
    first = min(batch_ids)
    where = spark_location or "<the query's checkpointLocation>"
    return SkippedBatchError(
        f"sink {sink_id} (table {table_name}): Spark ran batch(es) {sorted(batch_ids)}, which "
        "read input, but the foreachBatch function returned without calling the sink for "
        "them, so their changes are not in the table. Call the sink for every batch, also "
        "one with no rows or with only tombstones (debezium_row_schema gives such a batch "
        "its key columns; a batch that reads no input is never a problem). Then make Spark "
        f"run them again: `stream-sink rewind --spark-checkpoint-location {where} "
        f"--batch {first}` removes Spark's record of batch {first} and later ones, so the "
        f"next start runs batch {first} again from the offsets Spark logged for it"
    )


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
    skipped: Skipped | None = None
    had_input: HadInput = field(default=lambda _batch: True)

    def unaccounted(self, acknowledged: Sequence[int]) -> list[int]:
        above = max(self.watermark, self.covered)
        return [b for b in acknowledged if b > above and b not in self.known and self.had_input(b)]


def check_stale_state(accounting: Accounting, location: str, acknowledged: Sequence[int]) -> None:
    """Intact state: refuse when it does not account for an acknowledged batch."""
    lost = accounting.unaccounted(acknowledged)
    if not lost:
        return
    a = accounting
    if a.skipped is not None and set(lost) <= a.skipped.batch_ids:
        raise skipped_batch_error(a.sink_id, a.table_name, lost, a.skipped.upstream)
    raise DataLossError(
        f"sink {a.sink_id} (table {a.table_name}, job {a.job_id}): the operator state at "
        f"{location} does not hold acknowledged batches {lost}: the table's watermark is "
        f"{a.watermark}, the state records batches up to {max(a.covered, a.watermark)} as "
        "committed, and those batches are neither pending nor staged in it. The state is "
        "older than the run that processed them (a stale copy put back?), and their files "
        "were only recorded in the newer state; or the foreachBatch function returned "
        "without calling the sink for them. Nothing was changed: put back the newest "
        "state directory, or run those batches again (`stream-sink rewind`, see "
        "docs/operations.md), before restarting"
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
    lost = [b for b in acknowledged if b > covered and accounting.had_input(b)]
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
