"""Opening a table's data and delete files, whatever their format: Parquet, ORC, Avro.

A file is read in chunks: Parquet's row groups, ORC's stripes, an Avro file whole. Each
chunk's rows follow the previous chunk's, so a row's position in the file (what position
deletes name) is the rows of the chunks before it plus its index in its chunk.

Invariants:
- Every failure to decode a file, at opening or at reading a chunk, is an
  UnreadableFileError naming the file, its table and what to do; a missing file is a
  MissingFileError naming the same. Errors of stream_sink's own (storage) pass as they
  are.
- ``schema`` carries each column's field id in its field metadata (see
  :mod:`stream_sink.read.file_projection`), at every nesting level the file has them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import contextmanager
from typing import Protocol

import pyarrow as pa

from stream_sink.exceptions import MissingFileError, StreamSinkError, UnreadableFileError
from stream_sink.io.fileio import FileIO
from stream_sink.read.expressions import Expression
from stream_sink.table.manifest import FileFormat


class ChunkFilter(Protocol):
    """Whether a chunk might hold a row matching a filter, from its statistics."""

    @property
    def useful(self) -> bool: ...

    def might_match(self, chunk: int) -> bool: ...


class OpenFile(Protocol):
    """An open data or delete file."""

    schema: pa.Schema
    num_chunks: int

    def chunk_rows(self, chunk: int) -> int | None:
        """The rows of ``chunk`` when known without reading it (None: read to know)."""

    def read_chunk(self, chunk: int, columns: Sequence[str]) -> pa.Table:
        """The top-level ``columns`` of ``chunk``."""

    def read(self, columns: Sequence[str]) -> pa.Table:
        """The top-level ``columns`` of every row."""

    def chunk_filter(self, expr: Expression, fields: Mapping[int, pa.Field]) -> ChunkFilter | None:
        """A filter of chunks by their statistics (None: the format keeps none used here);
        ``fields``: the file's top-level field holding each field id."""


class NoChunkFilter:
    """Every chunk might match."""

    useful = False

    def might_match(self, chunk: int) -> bool:
        return True


@contextmanager
def open_data_file(
    io: FileIO, location: str, fmt: FileFormat, what: str, table: str
) -> Iterator[OpenFile]:
    """The file at ``location`` (``what``: "data file", "delete file") of ``table``."""
    try:
        source = io.open_input(location)
    except MissingFileError as e:
        raise MissingFileError(f"{what} {location} of table {table} is missing") from e
    try:
        with decoding(fmt, location, what, table):
            opened = _open(fmt, source, location)
        yield _Guarded(opened, lambda: decoding(fmt, location, what, table))
    finally:
        source.close()


class _Guarded:
    """``inner`` with every read's decoder error turned into UnreadableFileError."""

    def __init__(self, inner: OpenFile, guard: Callable[[], ContextManager[None]]) -> None:
        self._inner = inner
        self._guard = guard
        self.schema = inner.schema
        self.num_chunks = inner.num_chunks

    def chunk_rows(self, chunk: int) -> int | None:
        return self._inner.chunk_rows(chunk)

    def read_chunk(self, chunk: int, columns: Sequence[str]) -> pa.Table:
        with self._guard():
            return self._inner.read_chunk(chunk, columns)

    def read(self, columns: Sequence[str]) -> pa.Table:
        with self._guard():
            return self._inner.read(columns)

    def chunk_filter(self, expr: Expression, fields: Mapping[int, pa.Field]) -> ChunkFilter | None:
        return self._inner.chunk_filter(expr, fields)


def _open(fmt: FileFormat, source: pa.NativeFile, location: str) -> OpenFile:
    if fmt == FileFormat.PARQUET:
        from stream_sink.read.parquet_file import ParquetDataFile

        return ParquetDataFile(source, location)
    if fmt == FileFormat.ORC:
        from stream_sink.read.orc_file import OrcDataFile

        return OrcDataFile(source, location)
    if fmt == FileFormat.AVRO:
        from stream_sink.read.avro_file import AvroDataFile

        return AvroDataFile(source, location)
    raise UnreadableFileError(f"file {location} is {fmt.value}, not a data file format")


@contextmanager
def decoding(fmt: FileFormat, location: str, what: str, table: str) -> Iterator[None]:
    """Turns a decoder's error (pyarrow's, fastavro's) into UnreadableFileError."""
    try:
        yield
    except StreamSinkError:
        raise
    except Exception as e:  # decoders raise OSError, ArrowException, ValueError, ...
        raise UnreadableFileError(
            f"{what} {location} of table {table} cannot be read as {fmt.value}: "
            f"{type(e).__name__}: {e}. The file is damaged, or it uses a part of its "
            f"format that {_DECODER[fmt]} does not read (as some older Hive and Impala "
            "writers do). Apache Iceberg Java reads more of them: rewrite the files with "
            "it (Spark: CALL <catalog>.system.rewrite_data_files(table => '<table>'), "
            "which writes Parquet), then read the table here"
        ) from e


_DECODER = {
    FileFormat.PARQUET: f"pyarrow {pa.__version__}",
    FileFormat.ORC: f"pyarrow {pa.__version__}",
    FileFormat.AVRO: "fastavro",
}
