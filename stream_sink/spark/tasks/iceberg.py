"""What each Spark task of a micro-batch runs: a TaskWriter over its Arrow batches.

``WriteTask`` is the function handed to ``DataFrame.mapInArrow``. It is a frozen
dataclass so Spark pickles it (with its TaskWriterFactory) once per stage and every
task gets its own copy.

Invariants:
- A task yields exactly one row: the serialized WriteResult of its files (bytes; rows
  never return to the driver). An empty partition yields an empty WriteResult.
- Any failure, including one raised by Spark while it feeds the task, aborts the writer
  (its files are deleted) before the error propagates and fails the task; a retried
  attempt writes new files under its own attempt number.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from stream_sink.spark.cdc.ordering import TaskSort
from stream_sink.spark.cdc.ties import add_to, count_ties
from stream_sink.write.result import WriteResult
from stream_sink.write.task_writers import write_through
from stream_sink.write.writer_factory import TaskWriterFactory

from .shared import TaskIds, current_task_ids, result_batch

INSERT = "+I"


@dataclass(frozen=True)
class WriteTask:
    """``mapInArrow`` function: write every batch with one TaskWriter, yield its result."""

    factory: TaskWriterFactory
    insert_kind_column: str | None = None
    """When set, every row gets this column holding ``+I`` (upsert streams without a row
    kind column: each row replaces its key)."""

    tie_columns: tuple[str, ...] = ()
    """CDC: key and order columns; changes equal on all of them are ties (counted)."""
    drop_columns: tuple[str, ...] = ()
    """Columns that reach the task only to count ties; dropped before writing."""
    ties: Any = None
    """A Spark accumulator the task adds its tie count to (None: not counted)."""
    sort: TaskSort | None = None
    """CDC batches read in one task: check and order the rows here (see task_sort)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids = current_task_ids()
        counter = [0]
        if self.sort is not None:
            batches = self.sort(batches)
        if self.tie_columns:
            batches = count_ties(batches, self.tie_columns, self.drop_columns, counter)
        if self.insert_kind_column is not None:
            batches = with_insert_kind(batches, self.insert_kind_column)
        yield result_batch(write_all(self.factory, batches, ids))
        add_to(self.ties, counter)


def with_insert_kind(batches: Iterator[pa.RecordBatch], name: str) -> Iterator[pa.RecordBatch]:
    """``batches`` with a row kind column of ``+I`` appended."""
    for batch in batches:
        kinds = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(batch.num_rows, dtype=np.int8)), pa.array([INSERT])
        )
        yield batch.append_column(name, kinds)


def write_all(factory: TaskWriterFactory, batches: Iterator[pa.RecordBatch], ids: TaskIds) -> bytes:
    """Write ``batches``; the serialized WriteResult, or the error after an abort."""
    writer = factory.create(ids.partition_id, ids.task_id, ids.attempt_id)
    return write_through(writer, (b for b in batches if b.num_rows)).to_bytes()


def merge_results(serialized: list[bytes]) -> WriteResult:
    """The WriteResults of all tasks of a batch as one, in task order."""
    return WriteResult.merge(WriteResult.from_bytes(raw) for raw in serialized)
