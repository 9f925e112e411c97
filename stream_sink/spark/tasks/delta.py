"""What each Spark task of a Delta micro-batch runs (``mapInArrow`` functions).

Every task yields exactly one row: the serialized :class:`DeltaBatch` of the files it
wrote (file metadata only). A failure deletes the files the task wrote before it
propagates; a retried attempt writes new, uniquely named files.

- :class:`DeltaAppendTask`: the rows as data files (append and overwrite).
- :class:`DeltaRewriteTask`: copy-on-write of the touched files it is given: each is
  read, the batch's touched keys anti-joined away, the rest rewritten; the file removed.
- :class:`DeltaReadTask`: the rows of the files it is given, each with its file's path
  (the copy-on-write of a batch whose keys stay on the executors).
- :class:`DeltaInsertTask`: the batch's net changes of the keys hashed to this task
  (all changes of one key reach one task, sorted by key and order) as new data files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from stream_sink.delta.actions import AddFile, parse_action
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.column_mapping import ColumnMapping
from stream_sink.delta.features import supports_deletion_vectors
from stream_sink.delta.merge import MergeMode, abort_written, net_changes, rewrite_file
from stream_sink.delta.scan import read_file
from stream_sink.delta.schema import schema_to_arrow
from stream_sink.delta.snapshot import DeltaSnapshot
from stream_sink.delta.writer import write_data_files
from stream_sink.io.fileio import FileIO

from .shared import RESULT_SCHEMA

PATH_COLUMN = "add"


@dataclass(frozen=True)
class TableShape:
    """The parts of a table a task needs (picklable, small)."""

    location: str
    schema_string: str
    partition_columns: tuple[str, ...]
    storage_options: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """FileIO properties of the table's store (``s3.*``), for the executors."""
    mapping_mode: str = "none"
    """The column mapping mode files are written and read by."""
    deletion_vectors: bool = False
    """Whether a rewrite may write a deletion vector instead of a new file."""

    @property
    def schema(self) -> pa.Schema:
        return schema_to_arrow(self.schema_string)

    @property
    def mapping(self) -> ColumnMapping:
        return ColumnMapping(self.schema_string, self.mapping_mode)

    def io(self) -> FileIO:
        return FileIO.for_location(self.location, dict(self.storage_options))

    @staticmethod
    def of(snapshot: DeltaSnapshot, storage_options: Mapping[str, str] | None = None) -> TableShape:
        return TableShape(
            snapshot.location,
            snapshot.metadata.schema_string,
            snapshot.partition_columns,
            tuple(sorted((storage_options or {}).items())),
            snapshot.column_mapping.mode,
            supports_deletion_vectors(snapshot.protocol, snapshot.configuration),
        )


def _result(batch: DeltaBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([batch.to_bytes()], pa.binary())], schema=RESULT_SCHEMA
    )


def _abort(io: FileIO, location: str, adds: Iterable[AddFile]) -> None:
    abort_written(location, io, list(adds))  # the task fails anyway


def table_of(batches: Iterator[pa.RecordBatch], columns: Sequence[str] | None = None) -> pa.Table:
    """A task's input as one table (only ``columns``, when given); an empty input is an
    empty table."""
    parts = [b if columns is None else b.select(list(columns)) for b in batches if b.num_rows]
    if parts:
        return pa.Table.from_batches(parts)
    return pa.table({c: pa.array([], pa.null()) for c in columns or ()})


def write_rows(table: TableShape, rows: pa.Table) -> list[AddFile]:
    """The table's columns of ``rows`` as new data files of ``table`` (none for no rows);
    a failure leaves no file behind (:func:`~stream_sink.delta.writer.write_data_files`)."""
    if not rows.num_rows:
        return []
    schema = table.schema
    return write_data_files(
        table.location,
        rows.select([n for n in rows.column_names if n in schema.names]),
        schema,
        table.partition_columns,
        io=table.io(),
        mapping=table.mapping,
    )


def write_net_changes(
    table: TableShape,
    changes: pa.Table,
    keys: Sequence[str],
    mode: MergeMode,
    row_kind_column: str | None,
    order_by: Sequence[str],
) -> tuple[list[AddFile], pa.Table | None]:
    """The last change of each key in ``changes`` (sorted or not: in ``order_by`` order)
    written as new data files of ``table``, and the keys the changes touched (None for
    no changes); a failure leaves no file behind."""
    if not changes.num_rows:
        return [], None
    final, touched = net_changes(changes, tuple(keys), mode, row_kind_column, tuple(order_by))
    return write_rows(table, final), touched


@dataclass(frozen=True)
class DeltaAppendTask:
    table: TableShape

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield _result(DeltaBatch(tuple(write_rows(self.table, table_of(batches)))))


@dataclass(frozen=True)
class DeltaRewriteTask:
    """Rows: one ``add`` column of AddFile JSON per touched file."""

    table: TableShape
    keys: tuple[str, ...]
    touched: pa.Table
    timestamp_ms: int

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = self.table.io()
        parts: list[DeltaBatch] = []
        snapshot = _shape_only(self.table)
        try:
            for batch in batches:
                for raw in batch.column(PATH_COLUMN).to_pylist():
                    add = parse_action({"add": json.loads(raw)}, where="a touched file")
                    assert isinstance(add, AddFile)
                    part = rewrite_file(
                        snapshot,
                        io,
                        add,
                        self.touched,
                        self.keys,
                        self.timestamp_ms,
                        deletion_vectors=self.table.deletion_vectors,
                    )
                    if part is not None:
                        parts.append(part)
        except BaseException:
            _abort(io, self.table.location, [a for p in parts for a in p.adds])
            raise
        yield _result(DeltaBatch.merge(parts))


FILE_COLUMN = "__ss_file"
"""The column of a :class:`DeltaReadTask` row naming the file it was read from."""


@dataclass(frozen=True)
class DeltaReadTask:
    """Rows: one ``add`` column of AddFile JSON per file; yields every row of each file
    (partition columns filled in) as ``schema`` (the table's columns as Spark carries
    them, then :data:`FILE_COLUMN`)."""

    table: TableShape
    schema: pa.Schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        io = self.table.io()
        table_schema = self.table.schema
        snapshot = _shape_only(self.table)
        for batch in batches:
            for raw in batch.column(PATH_COLUMN).to_pylist():
                add = parse_action({"add": json.loads(raw)}, where="a touched file")
                assert isinstance(add, AddFile)
                rows = read_file(snapshot, io, add, table_schema)
                rows = rows.append_column(FILE_COLUMN, pa.array([add.path] * rows.num_rows))
                yield from rows.cast(self.schema).to_batches()


@dataclass(frozen=True)
class DeltaInsertTask:
    table: TableShape
    keys: tuple[str, ...]
    mode: MergeMode
    row_kind_column: str | None
    order_by: tuple[str, ...]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        adds, _ = write_net_changes(
            self.table, table_of(batches), self.keys, self.mode, self.row_kind_column, self.order_by
        )
        yield _result(DeltaBatch(tuple(adds)))


def _shape_only(table: TableShape) -> DeltaSnapshot:
    """A snapshot carrying only what :func:`read_file` needs (location, schema, partitions)."""
    from stream_sink.delta.actions import Metadata, Protocol
    from stream_sink.delta.column_mapping import MODE

    features = ("columnMapping",)
    protocol = Protocol(3, 7, features, features)
    config = {MODE: table.mapping_mode}
    meta = Metadata("", table.schema_string, table.partition_columns, config)
    return DeltaSnapshot(table.location, -1, protocol, meta, {}, {}, {})


def merge_batches(serialized: Sequence[bytes]) -> DeltaBatch:
    return DeltaBatch.merge(DeltaBatch.from_bytes(raw) for raw in serialized)
