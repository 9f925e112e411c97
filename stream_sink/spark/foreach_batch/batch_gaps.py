"""Batches Spark ran that never reached a foreachBatch sink.

Spark calls the ``foreachBatch`` function once per batch, with consecutive batch ids,
and acknowledges the batch when the function returns, whether or not it called the
sink. A function that returns without calling the sink (``if rows is None: return``)
loses that batch's changes: Spark will not run it again. The front doors see it:

- at the next batch of the same run: a batch id above the last one plus one means the
  ones between were skipped;
- at :meth:`BatchGaps.run_ended` (a graceful ``close``): batches in Spark's commit log
  after the last one the sink got.

Invariants: a skipped batch that read no input (:func:`stream_sink.spark.query.batch_read_input`:
a no-data batch only moves an event-time watermark) loses nothing and is let pass; any
other is recorded in every table's state as skipped (so the next restore names it as
such, :mod:`stream_sink.commit.loss_check`) before SkippedBatchError stops the batch
after it, with nothing of that batch written. At close the error is logged, not
raised: closing never hides the error that led there, and the next start refuses.
"""

from __future__ import annotations

import logging

from stream_sink.commit.driver import CommitDriver
from stream_sink.commit.loss_check import skipped_batch_error
from stream_sink.io.fileio import FileIO
from stream_sink.spark import query

log = logging.getLogger(__name__)


class BatchGaps:
    """The last batch id this run handed to sink ``sink_id`` (see the module)."""

    def __init__(self, sink_id: str, table_name: str, spark_checkpoint_location: str) -> None:
        self.sink_id = sink_id
        self.table_name = table_name
        self.spark_checkpoint_location = spark_checkpoint_location
        self._last: int | None = None

    def arrived(self, batch_id: int, driver: CommitDriver, io: FileIO) -> None:
        """Batch ``batch_id`` reached the sink: SkippedBatchError (after recording them)
        when batches with input came between it and the last one of this run."""
        last, self._last = self._last, batch_id
        if last is None or batch_id <= last + 1:
            return
        self._refuse(range(last + 1, batch_id), driver, io, raise_it=True)

    def run_ended(self, driver: CommitDriver | None, io: FileIO) -> None:
        """The run ends (a graceful close): record and log the batches Spark acknowledged
        after the last one the sink got."""
        last, self._last = self._last, None
        if last is None or driver is None:
            return
        location = self.spark_checkpoint_location
        after = [b for b in query.acknowledged_batch_ids(location, io) if b > last]
        self._refuse(after, driver, io, raise_it=False)

    def _refuse(
        self, batch_ids: range | list[int], driver: CommitDriver, io: FileIO, *, raise_it: bool
    ) -> None:
        location = self.spark_checkpoint_location
        skipped = [b for b in batch_ids if query.batch_read_input(location, b, io)]
        if not skipped:
            return
        driver.record_skipped(skipped, location)
        error = skipped_batch_error(self.sink_id, self.table_name, skipped, location)
        if raise_it:
            raise error
        log.error("%s", error)
