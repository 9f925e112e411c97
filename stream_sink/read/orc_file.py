"""An ORC data or delete file (migrated Hive and Impala tables, ``write.format.default=orc``),
opened with pyarrow: its stripes are its chunks, read one at a time.

Apache Iceberg's ORC writer puts each column's field id in the ORC type attribute
``iceberg.id``, which pyarrow keeps in the Arrow field metadata, at every nesting level;
files without it (written by Hive) are read by the table's name mapping. pyarrow reads
ORC's timestamps in nanoseconds, a fixed or uuid column as binary and a time column as
its long of microseconds: :mod:`stream_sink.read.file_projection` casts each to the
table's type. No statistics are used to skip stripes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.orc as orc

from stream_sink.read.data_files import NoChunkFilter
from stream_sink.read.expressions import Expression


class OrcDataFile:
    """The stripes of the ORC file ``source`` (``location`` names it)."""

    def __init__(self, source: pa.NativeFile, location: str) -> None:
        self.location = location
        self._file = orc.ORCFile(source)
        self.schema = self._file.schema
        self.num_chunks = self._file.nstripes

    def chunk_rows(self, chunk: int) -> None:
        return None  # pyarrow tells a stripe's rows only by reading it

    def read_chunk(self, chunk: int, columns: Sequence[str]) -> pa.Table:
        batch = self._file.read_stripe(chunk, columns=self._columns(columns))
        return pa.Table.from_batches([batch]).select(list(columns))

    def read(self, columns: Sequence[str]) -> pa.Table:
        return self._file.read(columns=self._columns(columns)).select(list(columns))

    def _columns(self, columns: Sequence[str]) -> list[str]:
        """``columns``, or one column when none is asked for: pyarrow reads no rows at
        all for an empty list, and a count needs them."""
        if columns or not len(self.schema):
            return list(columns)
        return [self.schema.field(0).name]

    def chunk_filter(self, expr: Expression, fields: Mapping[int, pa.Field]) -> NoChunkFilter:
        return NoChunkFilter()
