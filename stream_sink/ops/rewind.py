"""Making Spark run a batch again: ``stream-sink rewind``.

A batch Spark acknowledged (``commits/<id>``) is never run again, even when its changes
never reached the sink (a ``foreachBatch`` function that returned without calling it:
SkippedBatchError). Spark's own restart rule runs the newest batch of its offset log
again when the commit log does not hold it, with the offsets logged for it. Rewinding to
batch ``N`` therefore removes ``offsets/<id>`` for every id above ``N`` and then
``commits/<id>`` for every id from ``N`` on (with Spark's ``.<id>.crc`` checksums): the
next start runs batch ``N`` again over the same input, and every later batch after it.

Invariants:
- Nothing is removed unless ``offsets/N`` exists (the batch's input must be known) and
  ``N`` is at or below the newest batch in the offset log.
- Offsets go first, newest first, then commits: interrupted at any point, the log is one
  Spark restarts from without losing input (at worst batch ``N`` is not yet rerun; run
  the command again).
- The sink's own checkpoint and the table are not touched: batches at or below the
  table's watermark that Spark runs again are replays the sink drops, so a rewind never
  writes a change twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from stream_sink.exceptions import CheckpointError
from stream_sink.io.fileio import FileIO
from stream_sink.spark import query


@dataclass(frozen=True)
class Rewind:
    """What a rewind of a Spark checkpoint to ``batch_id`` removes (locations)."""

    spark_checkpoint_location: str
    batch_id: int
    offsets: tuple[int, ...]
    commits: tuple[int, ...]

    def files(self) -> list[str]:
        """Every file removed, in the order they are removed."""
        out = []
        for log_dir, ids in ((query.OFFSETS_DIR, self.offsets), (query.COMMITS_DIR, self.commits)):
            for b in ids:
                base = f"{self.spark_checkpoint_location.rstrip('/')}/{log_dir}"
                out += [f"{base}/{b}", f"{base}/.{b}.crc"]
        return out


def plan_rewind(spark_checkpoint_location: str, batch_id: int, io: FileIO) -> Rewind:
    """The rewind to ``batch_id`` (CheckpointError when Spark's logs do not allow it)."""
    planned = query.planned_batch_ids(spark_checkpoint_location, io)
    if batch_id not in planned:
        known = f"{planned[0]} to {planned[-1]}" if planned else "none"
        raise CheckpointError(
            f"{spark_checkpoint_location}: Spark's offset log has no batch {batch_id} "
            f"(batches logged: {known}), so its input is not known: pass a batch id that "
            "the offset log holds (Spark keeps the last spark.sql.streaming."
            "minBatchesToRetain batches)"
        )
    acknowledged = query.acknowledged_batch_ids(spark_checkpoint_location, io)
    return Rewind(
        spark_checkpoint_location,
        batch_id,
        tuple(sorted((b for b in planned if b > batch_id), reverse=True)),
        tuple(sorted((b for b in acknowledged if b >= batch_id), reverse=True)),
    )


def rewind(plan: Rewind, io: FileIO) -> None:
    """Remove what ``plan`` names, in its order (see the module's invariants)."""
    for location in plan.files():
        io.delete(location)
