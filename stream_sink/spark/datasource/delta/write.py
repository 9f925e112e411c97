"""What each Spark task of ``format("stream_sink")`` into a Delta table runs.

The rows are written as ``DeltaSink``'s tasks write them
(:func:`stream_sink.spark.tasks.delta.write_rows`, ``write_net_changes``):

- append and overwrite: the task's rows as data files.
- upsert and changelog: the task's net changes (per key, the last change in source
  order: :func:`stream_sink.delta.merge.net_changes`) as data files, plus the keys it
  touched and their 64-bit hashes spilled to files under the sink's checkpoint location
  (:mod:`stream_sink.delta.key_spill`; the task returns their paths and bounds only).
  The driver's commit refuses a batch in which two tasks wrote the same key (as for
  Iceberg) and removes the touched keys from the table's live files (the copy-on-write
  half of the MERGE, which needs every task's keys, so it runs in the commit, streaming
  the spills: the driver never holds a batch's keys).

Invariants: a task returns file metadata only; a failure deletes the files it wrote
before the error propagates; a retried attempt writes new, uniquely named files.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.key_spill import HASH_DTYPE, KeySpill, write_spill
from stream_sink.delta.merge import MergeMode, abort_written
from stream_sink.io.fileio import FileIO
from stream_sink.spark.cdc.truncation import refuse_in_task
from stream_sink.spark.datasource.delta.options import DeltaRouteOptions
from stream_sink.spark.datasource.write import TaskOutput, key_hashes
from stream_sink.spark.tasks.delta import TableShape, table_of, write_net_changes, write_rows
from stream_sink.spark.tasks.shared import current_task_ids


@dataclass(frozen=True)
class DeltaSourceTask:
    """Picklable description of the executors' work for one query (or batch write)."""

    table: TableShape
    columns: tuple[str, ...]
    """The DataFrame's columns the task keeps (the table's, plus the row kind and order
    columns of CDC modes)."""
    mode: str = "append"
    key_columns: tuple[str, ...] = ()
    row_kind_column: str | None = None
    order_columns: tuple[str, ...] = ()
    spill_location: str = ""
    """Where CDC tasks spill their touched keys (a folder of the sink's checkpoint)."""

    def run(self, batches: Iterator[pa.RecordBatch]) -> TaskOutput:
        ids = current_task_ids()
        data = table_of(batches, self.columns)
        refuse_in_task(data, self.row_kind_column, f"Delta table {self.table.location}")
        if not self.key_columns:
            adds = write_rows(self.table, data)
            return TaskOutput(ids.partition_id, DeltaBatch(tuple(adds)).to_bytes())
        mode: MergeMode = "changelog" if self.mode == "changelog" else "upsert"
        adds, touched = write_net_changes(
            self.table, data, self.key_columns, mode, self.row_kind_column, self.order_columns
        )
        result = DeltaBatch(tuple(adds)).to_bytes()
        if touched is None or not touched.num_rows:
            return TaskOutput(ids.partition_id, result)
        try:
            spill = self._spill(touched)
        except BaseException:
            abort_written(self.table.location, self.table.io(), adds)  # the task fails anyway
            raise
        return TaskOutput(ids.partition_id, result, touched=pickle.dumps(spill))

    def _spill(self, touched: pa.Table) -> KeySpill:
        """The keys the task touched and their hashes, spilled beside the checkpoints."""
        hashes = np.frombuffer(key_hashes(touched, self.key_columns), dtype=HASH_DTYPE)
        spill_io = FileIO.for_location(self.spill_location, dict(self.table.storage_options))
        return write_spill(
            spill_io, self.spill_location, touched, hashes, self.table.partition_columns
        )


@dataclass(frozen=True)
class DeltaPreparedWrite:
    """What the driver planned for one query or batch write into a Delta table."""

    options: DeltaRouteOptions
    task: DeltaSourceTask
    driver = "stream_sink.spark.datasource.delta.commit"
    """The module whose commit and abort functions Spark's commit step calls."""


def spills_of(raw: bytes) -> KeySpill:
    """The :class:`KeySpill` a task returned (``TaskOutput.touched``)."""
    spill = pickle.loads(raw)
    assert isinstance(spill, KeySpill)
    return spill
