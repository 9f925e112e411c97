"""What each Spark task of ``format("stream_sink")`` runs: the same TaskWriters as
``foreachBatch``, over the Arrow batches of the task's partition as the query made it.

The Data Source API cannot ask Spark to distribute or sort the rows it hands the
writer (Spark rejects sorting a streaming DataFrame too). So in CDC modes a task
sorts its own rows by (key, order columns) before writing them (a stable sort: rows
of equal order keep their arrival order), which holds the task's rows in memory, and
it reports a 64-bit hash of each distinct key it wrote. The driver's commit refuses a
batch in which two tasks wrote the same key (:func:`check_keys_disjoint`): those
changes could not be put in source order, and the user must ``.repartition`` the
stream by its key columns.

Invariants: a task returns its serialized WriteResult (file metadata only); any
failure aborts its writer (files deleted) before the error propagates.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from stream_sink.exceptions import InvalidOptionError, ValidationError
from stream_sink.spark.cdc.truncation import refuse_in_task
from stream_sink.spark.datasource.options import SourceOptions
from stream_sink.spark.tasks.iceberg import with_insert_kind, write_all
from stream_sink.spark.tasks.shared import current_task_ids
from stream_sink.write.writer_factory import TaskWriterFactory

HASH_DTYPE = np.dtype("<u8")


BATCH_MODES = ("append", "overwrite")


def runs_as_overwrite(
    mode: str, *, streaming: bool, overwrite: bool, where: str, batch_where: str, hint: str = ""
) -> bool:
    """Whether a write through the route in ``mode`` runs as mode ``overwrite`` instead.

    Invariants: a stream replaces the table (``outputMode('complete')``) only in mode
    ``overwrite``; a batch write runs in ``append`` or ``overwrite`` only, and Spark's
    ``mode('overwrite')`` makes it ``overwrite``. Anything else is refused before a file
    is written. ``where``/``batch_where`` name the route in the error; ``hint`` ends the
    batch-mode error.
    """
    if streaming and overwrite and mode != "overwrite":
        raise InvalidOptionError(
            f"{where}: outputMode('complete') replaces the table on every batch; use "
            f"outputMode('append') (mode={mode!r}), or mode='overwrite'"
        )
    if streaming:
        return False
    if mode not in BATCH_MODES:
        raise InvalidOptionError(
            f"{batch_where}: mode={mode!r} is for streams; batch writes take mode append "
            f"or overwrite{hint}"
        )
    return overwrite and mode != "overwrite"


@dataclass(frozen=True)
class TaskOutput:
    """What one task hands to the driver's commit."""

    partition_id: int
    result: bytes
    key_hashes: bytes = b""
    """Sorted distinct 64-bit key hashes (CDC modes), little-endian."""
    touched: bytes = b""
    """Delta CDC modes: the distinct keys the task changed, as an Arrow IPC stream."""


@dataclass(frozen=True)
class SourceWriteTask:
    """Picklable description of the executors' work for one query (or batch write)."""

    factory: TaskWriterFactory
    columns: tuple[str, ...]
    """Columns the writers take, in order (the row kind column last in CDC modes)."""
    insert_kind_column: str | None = None
    key_columns: tuple[str, ...] = ()
    """CDC modes: the equality fields (empty: append or overwrite)."""
    order_columns: tuple[str, ...] = ()
    row_kind_column: str | None = None
    """CDC modes: the row kind column, if the stream has one (a TRUNCATE is refused)."""

    def run(self, batches: Iterator[pa.RecordBatch]) -> TaskOutput:
        ids = current_task_ids()
        if not self.key_columns:
            result = write_all(self.factory, self._prepared(_select(batches, self.columns)), ids)
            return TaskOutput(ids.partition_id, result)
        data = _collect(batches)
        if data is None:
            return TaskOutput(ids.partition_id, write_all(self.factory, iter(()), ids))
        refuse_in_task(data, self.row_kind_column, f"table {self.factory.table_name}")
        data = data.sort_by([(c, "ascending") for c in (*self.key_columns, *self.order_columns)])
        hashes = key_hashes(data, self.key_columns)
        out = data.select(list(self.columns)).to_batches()
        result = write_all(self.factory, self._prepared(iter(out)), ids)
        return TaskOutput(ids.partition_id, result, hashes)

    def _prepared(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.insert_kind_column is None:
            return batches
        return with_insert_kind(batches, self.insert_kind_column)


@dataclass(frozen=True)
class PreparedWrite:
    """What the driver planned for one query or batch write: the parsed options (for the
    commit) and the executors' task. Pickled to the executors with the writer."""

    options: SourceOptions
    task: SourceWriteTask
    driver = "stream_sink.spark.datasource.commit"
    """The module whose commit and abort functions Spark's commit step calls."""


def _select(
    batches: Iterator[pa.RecordBatch], columns: tuple[str, ...]
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if tuple(batch.schema.names) == columns:
            yield batch
        else:
            yield batch.select(list(columns))


def _collect(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    chunks = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(chunks) if chunks else None


def key_hashes(data: pa.Table, keys: tuple[str, ...]) -> bytes:
    """Sorted distinct 64-bit hashes of the ``keys`` columns' value tuples."""
    import pandas as pd

    frame = data.select(list(keys)).to_pandas()
    hashed = pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=HASH_DTYPE)
    return np.unique(hashed).astype(HASH_DTYPE).tobytes()


def check_keys_disjoint(
    outputs: list[TaskOutput], where: str, keys: tuple[str, ...], batch: str
) -> None:
    """Raise ValidationError when two tasks of ``batch`` wrote the same key."""
    arrays = [np.frombuffer(o.key_hashes, dtype=HASH_DTYPE) for o in outputs if o.key_hashes]
    if len(arrays) < 2:
        return
    every = np.concatenate(arrays)
    refuse_shared_keys(every.size - np.unique(every).size, where, keys, batch)


def refuse_shared_keys(shared: int, where: str, keys: tuple[str, ...], batch: str) -> None:
    """Raise ValidationError when ``shared`` keys of ``batch`` reached more than one task."""
    if shared:
        cols = ", ".join(repr(k) for k in keys)
        raise ValidationError(
            f"{where}: {batch}: {shared} key(s) reached more than one Spark task, so their "
            f"changes cannot be applied in source order; call .repartition({cols}) on the "
            "DataFrame before .writeStream (nothing of this batch was committed)"
        )
