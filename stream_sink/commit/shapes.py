"""Commit shapes: how the staged batches of completed checkpoints become snapshots.

- No delete file in any batch: ONE append of every data file, stamped with the highest
  batch id covered.
- Any delete file: ONE row delta PER BATCH, in batch order, each stamped with its own
  batch id. Equality deletes apply only to data of a lower sequence number, so merging
  two batches into one snapshot would let an update of a row inserted by the earlier
  batch leave both rows alive (Iceberg #10431).
- A batch that truncates (a TRUNCATE of the source table in its changes) makes the
  same ONE row delta PER BATCH: its own snapshot removes every data and delete file
  live on the table it is committed on and adds the batch's files, so the batches
  before it land before it is emptied and the batches after it land on the empty table.
- Overwrite mode: ONE dynamic partition replacement PER BATCH, in batch order (each
  micro-batch replaces the partitions it writes, as Spark's per-batch overwrite does);
  delete files are refused.
Batches without files are covered by the stamp but need no snapshot of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from stream_sink.exceptions import ValidationError

from .source_position import BatchOffsets
from .target import BatchFiles

CommitMode = Literal["append", "overwrite"]
"""How the committer turns batches into snapshots: ``append`` (appends, or row deltas when
a batch has delete files) or ``overwrite`` (dynamic partition replacement). Not the sink's
write mode (``stream_sink.spark.options.WriteMode``: append, upsert, changelog,
overwrite), which maps onto it: every write mode but ``overwrite`` commits as ``append``."""
COMMIT_MODES: tuple[CommitMode, ...] = ("append", "overwrite")


class Shape(Enum):
    APPEND = "append"
    ROW_DELTA = "row-delta"
    REPLACE_PARTITIONS = "replace-partitions"
    EMPTY = "empty"


@dataclass(frozen=True)
class StagedBatch:
    """One batch of a staged checkpoint: the target's staging payload (empty: nothing
    staged) and the files read back from it."""

    checkpoint_id: int
    batch_id: int
    payload: bytes
    files: BatchFiles


@dataclass(frozen=True)
class CommitGroup:
    """Batches that become one snapshot stamped with ``stamp``."""

    shape: Shape
    batches: tuple[StagedBatch, ...]
    stamp: int
    offsets: BatchOffsets | None = None
    """The query's end offsets of batch ``stamp``, recorded in the same table version
    (None: the committer has no offset source, nothing is recorded)."""

    @property
    def lowest(self) -> int:
        """The lowest batch id this snapshot commits; the watermark must stay below it."""
        return min((b.batch_id for b in self.batches), default=self.stamp)


def plan_commits(batches: Sequence[StagedBatch], mode: CommitMode, stamp: int) -> list[CommitGroup]:
    """The snapshots for ``batches`` (ascending batch ids), empty when no batch has files."""
    with_files = tuple(b for b in batches if not b.files.is_empty)
    if not with_files:
        return []
    if mode == "overwrite":
        for b in with_files:
            if b.files.truncate:
                raise ValidationError(
                    f"overwrite mode cannot apply a TRUNCATE: batch {b.batch_id} carries one; "
                    "write change streams in mode 'upsert' or 'changelog'"
                )
            if b.files.delete_files:
                raise ValidationError(
                    f"overwrite mode cannot commit delete files: batch {b.batch_id} carries "
                    f"{len(b.files.delete_files)}"
                )
        return [CommitGroup(Shape.REPLACE_PARTITIONS, (b,), b.batch_id) for b in with_files]
    if any(b.files.delete_files or b.files.truncate for b in with_files):
        return [CommitGroup(Shape.ROW_DELTA, (b,), b.batch_id) for b in with_files]
    return [CommitGroup(Shape.APPEND, with_files, stamp)]


def empty_group(stamp: int, batches: Sequence[StagedBatch]) -> CommitGroup:
    """An empty snapshot that only advances the watermark to ``stamp``."""
    return CommitGroup(Shape.EMPTY, tuple(batches), stamp)
