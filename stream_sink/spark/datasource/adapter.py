"""``format("stream_sink")``: the sink as a Spark Python Data Source (pyspark >= 4.0).

Imported only through :func:`stream_sink.spark.datasource.register.register`, because
``pyspark.sql.datasource`` does not exist before pyspark 4.0. The classes here only
adapt Spark's calls; the work is in ``commit`` (driver) and ``write``
(executors), which is imported only where it runs: executors import the writing side
only. Writers take Arrow batches where the pyspark version offers an Arrow
writer, and rows otherwise (converted to Arrow in chunks).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pyarrow as pa
from pyspark.sql import datasource as ds

from stream_sink.spark.datasource.write import PreparedWrite, TaskOutput

NAME = "stream_sink"
ROW_CHUNK = 10_000
_ARROW_BATCH_WRITER = getattr(ds, "DataSourceArrowWriter", None)
_ARROW_STREAM_WRITER = getattr(ds, "DataSourceStreamArrowWriter", None)
BatchWriterBase: Any = _ARROW_BATCH_WRITER or ds.DataSourceWriter
StreamWriterBase: Any = _ARROW_STREAM_WRITER or ds.DataSourceStreamWriter


@dataclass(frozen=True)
class SinkCommitMessage(ds.WriterCommitMessage):  # type: ignore[misc]
    output: TaskOutput


def _outputs(messages: list[Any]) -> list[TaskOutput | None]:
    return [m.output if isinstance(m, SinkCommitMessage) else None for m in messages]


def _driver(prepared: Any) -> ModuleType:
    """The commit module of the prepared write's target (``commit`` for Iceberg,
    ``delta.commit`` for Delta), imported only where commits run."""
    return importlib.import_module(prepared.driver)


def _arrow_batches(prepared: Any, rows: Iterator[Any], arrow: bool) -> Iterator[pa.RecordBatch]:
    """The task's input as Arrow batches (rows are converted when Spark sends rows)."""
    if arrow:
        yield from rows
        return
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row.asDict(recursive=True))
        if len(chunk) >= ROW_CHUNK:
            yield pa.RecordBatch.from_pylist(chunk)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk)


class SinkBatchWriter(BatchWriterBase):  # type: ignore[misc, valid-type]
    """``df.write.format("stream_sink")``: one snapshot per write."""

    def __init__(self, prepared: PreparedWrite | Any) -> None:
        self.prepared = prepared

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        batches = _arrow_batches(self.prepared, iterator, _ARROW_BATCH_WRITER is not None)
        return SinkCommitMessage(self.prepared.task.run(batches))

    def commit(self, messages: list[Any]) -> None:
        _driver(self.prepared).commit_batch(self.prepared, _outputs(messages))

    def abort(self, messages: list[Any]) -> None:
        _driver(self.prepared).abort_batch(self.prepared, _outputs(messages))


class SinkStreamWriter(StreamWriterBase):  # type: ignore[misc, valid-type]
    """``df.writeStream.format("stream_sink")``: every micro-batch committed exactly once."""

    def __init__(self, prepared: PreparedWrite | Any) -> None:
        self.prepared = prepared

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        batches = _arrow_batches(self.prepared, iterator, _ARROW_STREAM_WRITER is not None)
        return SinkCommitMessage(self.prepared.task.run(batches))

    def commit(self, messages: list[Any], batchId: int) -> None:
        _driver(self.prepared).commit_stream(self.prepared, _outputs(messages), int(batchId))

    def abort(self, messages: list[Any], batchId: int) -> None:
        _driver(self.prepared).abort_stream(self.prepared, _outputs(messages), int(batchId))


class StreamSinkDataSource(ds.DataSource):  # type: ignore[misc]
    """The ``stream_sink`` format (options: ``stream_sink.spark.datasource.options``; with
    ``.option("target", "delta")``, ``stream_sink.spark.datasource.delta.options``)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        from stream_sink.spark.datasource.options import parse_route_options

        parse_route_options(dict(options), streaming=False)  # unknown options fail early

    def writer(self, schema: Any, overwrite: bool) -> SinkBatchWriter:
        from stream_sink.spark.datasource.commit import prepare_write

        return SinkBatchWriter(
            prepare_write(dict(self.options), schema, streaming=False, overwrite=overwrite)
        )

    def streamWriter(self, schema: Any, overwrite: bool) -> SinkStreamWriter:
        from stream_sink.spark.datasource.commit import prepare_write

        return SinkStreamWriter(
            prepare_write(dict(self.options), schema, streaming=True, overwrite=overwrite)
        )
