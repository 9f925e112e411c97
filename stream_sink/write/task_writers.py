"""Task writers: what one Spark task (one attempt) runs to write its rows (Java's TaskWriter).

Variants, chosen by ``TaskWriterFactory.create`` (:mod:`stream_sink.write.writer_factory`)
from (partitioned?, equality fields?):

==============  ==========================  ==========================================
                no equality fields          equality fields (``stream_sink.write.cdc_writers``)
==============  ==========================  ==========================================
unpartitioned   :class:`UnpartitionedWriter`  ``UnpartitionedDeltaWriter``
partitioned     :class:`PartitionedFanoutWriter`  ``PartitionedDeltaWriter``
==============  ==========================  ==========================================

Every variant subclasses :class:`BaseTaskWriter` and is built as ``cls(factory, files)``.

Invariants:
- Input is checked against the table schema (names, types, nullability) before a
  byte is written; a mismatch raises SchemaMismatchError naming the column.
- ``abort()`` deletes every file the writer created (complete or not) and is safe
  after any failure, after ``complete()`` and more than once.
- The fanout writer keeps at most ``write.fanout.max-open-files`` files open. When a
  new partition would exceed that, the least recently written partition's file is
  finished (it becomes a complete data file of the result) and, should that partition
  appear again, a new file is opened for it. Unwritten row groups of all open files
  together stay under ``write.fanout.max-buffered-bytes``: above it the largest buffer
  is written out as a row group.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

from stream_sink.io.errors import quietly
from stream_sink.table.arrow import conform_to_schema
from stream_sink.table.manifest import DataFile
from stream_sink.write.file_factory import OutputFileFactory
from stream_sink.write.grouping import group_by_partition
from stream_sink.write.parquet import FileSpec, has_nan
from stream_sink.write.result import WriteResult
from stream_sink.write.rolling import RollingFileWriter, Segment

if TYPE_CHECKING:
    from stream_sink.write.writer_factory import TaskWriterFactory


class TaskWriter(ABC):
    @abstractmethod
    def write(self, batch: pa.RecordBatch | pa.Table) -> None: ...

    @abstractmethod
    def complete(self) -> WriteResult:
        """Finish every open file; the files written (nothing is committed here)."""

    @abstractmethod
    def abort(self) -> None:
        """Delete every file written; see the module invariants."""


def write_through(writer: TaskWriter, batches: Iterable[pa.RecordBatch | pa.Table]) -> WriteResult:
    """Write every batch with ``writer`` and complete it: what one task runs, on an
    executor or in ``IcebergTable.append``. Any failure, including one raised while
    ``batches`` is iterated, aborts the writer (its files are deleted) and re-raises."""
    try:
        for batch in batches:
            writer.write(batch)
        return writer.complete()
    except BaseException:
        writer.abort()
        raise


class Buffered(Protocol):
    """An open writer whose unwritten row groups hold memory."""

    @property
    def buffered_bytes(self) -> int: ...

    def flush(self) -> None: ...


class BaseTaskWriter(TaskWriter):
    """Shared plumbing: schema conformance, rolling writers, cleanup on abort."""

    def __init__(self, factory: TaskWriterFactory, files: OutputFileFactory) -> None:
        self.factory = factory
        self.files = files
        self._writers: list[RollingFileWriter] = []
        self._done: list[DataFile] = []
        self._other_files: list[str] = []

    def conform(self, batch: pa.RecordBatch | pa.Table) -> pa.Table:
        """``batch`` in the table's Arrow form; SchemaMismatchError names the column."""
        f = self.factory
        return conform_to_schema(batch, f.schema, f.table_name, invalid_utf8=f.config.invalid_utf8)

    def new_rolling_writer(
        self,
        spec: FileSpec,
        target_bytes: int,
        partition: tuple[Any, ...] = (),
        suffix: str | None = None,
    ) -> RollingFileWriter:
        """A rolling writer whose files ``abort`` will delete."""
        w = RollingFileWriter(
            self.factory.io,
            self.files,
            spec,
            target_bytes,
            partition=partition,
            check_rows=self.factory.config.size_check_rows,
            suffix=suffix,
        )
        self._writers.append(w)
        return w

    def finish_writer(self, w: RollingFileWriter) -> list[DataFile]:
        """Complete ``w`` early (its files stay owned for ``abort``)."""
        files = w.complete()
        self._done.extend(files)
        return files

    def new_owned_location(self, partition: tuple[Any, ...], suffix: str, extension: str) -> str:
        """A location for a file written outside the rolling writers (a Puffin file of
        deletion vectors) that ``abort`` will delete."""
        location = self.files.new_location(partition, suffix, extension)
        self._other_files.append(location)
        return location

    def abort(self) -> None:
        for w in self._writers:
            w.abort()
        for location in self._other_files:
            quietly(functools.partial(self.factory.io.delete, location), f"deleting {location}")

    def bound_memory(self, open_writers: Collection[Buffered]) -> None:
        """Keep the unwritten row groups of ``open_writers`` together under
        ``write.fanout.max-buffered-bytes``: write out the largest buffer while above."""
        limit = self.factory.config.fanout_max_buffered_bytes
        buffered = sum(w.buffered_bytes for w in open_writers)
        while buffered > limit:
            largest = max(open_writers, key=lambda w: w.buffered_bytes)
            buffered -= largest.buffered_bytes
            largest.flush()

    def _guarded(self, action: Any, *args: Any) -> Any:
        """Run ``action``; any failure aborts (no file left behind) and re-raises."""
        try:
            return action(*args)
        except BaseException:
            self.abort()
            raise


class UnpartitionedWriter(BaseTaskWriter):
    """All rows into one rolling sequence of data files."""

    def __init__(self, factory: TaskWriterFactory, files: OutputFileFactory) -> None:
        super().__init__(factory, files)
        target = factory.config.target_file_bytes
        self._out = self.new_rolling_writer(
            factory.data_file_spec(), target, factory.unpartitioned_tuple
        )

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._guarded(self.write_rows, batch)

    def write_rows(self, batch: pa.RecordBatch | pa.Table) -> list[Segment]:
        """Write and say where each row went (for callers that track positions)."""
        return self._out.write(self.conform(batch))

    def complete(self) -> WriteResult:
        return WriteResult(data_files=tuple(self._guarded(self._out.complete)))


class PartitionedFanoutWriter(BaseTaskWriter):
    """One open rolling writer per partition, capped (see module invariants)."""

    def __init__(self, factory: TaskWriterFactory, files: OutputFileFactory) -> None:
        super().__init__(factory, files)
        self._spec = factory.data_file_spec()
        self._open: OrderedDict[tuple[Any, ...], RollingFileWriter] = OrderedDict()

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._guarded(self._write, batch)

    def _write(self, batch: pa.RecordBatch | pa.Table) -> None:
        data = self.conform(batch)
        f = self.factory
        nan_free = not has_nan(data, self._spec)  # once per batch, not once per partition
        for group in group_by_partition(data, f.spec, f.schema):
            self._writer_for(group.partition).write(group.rows, nan_free, group.nbytes)
        self.bound_memory(self._open.values())

    def _writer_for(self, partition: tuple[Any, ...]) -> RollingFileWriter:
        w = self._open.get(partition)
        if w is not None:
            self._open.move_to_end(partition)
            return w
        if len(self._open) >= self.factory.config.fanout_max_open_files:
            _, oldest = self._open.popitem(last=False)
            self.finish_writer(oldest)
        w = self.new_rolling_writer(self._spec, self.factory.config.target_file_bytes, partition)
        self._open[partition] = w
        return w

    def complete(self) -> WriteResult:
        def finish() -> WriteResult:
            for w in self._open.values():
                self.finish_writer(w)
            self._open.clear()
            return WriteResult(data_files=tuple(self._done))

        return self._guarded(finish)  # type: ignore[no-any-return]
