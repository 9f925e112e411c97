"""A Parquet data or delete file, opened with pyarrow: its row groups are its chunks,
skipped by their column statistics (:mod:`stream_sink.read.row_groups`).

INT96 timestamps (older Hive, Impala and Spark writers) are read as microseconds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.read.expressions import Expression
from stream_sink.read.row_groups import RowGroupFilter


class ParquetDataFile:
    """The row groups of the Parquet file ``source`` (``location`` names it)."""

    def __init__(self, source: pa.NativeFile, location: str) -> None:
        self.location = location
        self._file = pq.ParquetFile(source, coerce_int96_timestamp_unit="us")
        self.schema = self._file.schema_arrow
        self.num_chunks = self._file.num_row_groups

    def chunk_rows(self, chunk: int) -> int:
        return int(self._file.metadata.row_group(chunk).num_rows)

    def read_chunk(self, chunk: int, columns: Sequence[str]) -> pa.Table:
        return self._file.read_row_group(chunk, columns=list(columns), use_threads=True)

    def read(self, columns: Sequence[str]) -> pa.Table:
        return self._file.read(columns=list(columns), use_threads=True)

    def chunk_filter(self, expr: Expression, fields: Mapping[int, pa.Field]) -> RowGroupFilter:
        return RowGroupFilter(expr, self._file.metadata, fields)
