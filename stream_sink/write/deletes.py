"""Delete files of the CDC writers: equality deletes, sorted position deletes (v2)
and deletion vectors (v3: one Puffin blob per data file, position delete files being
forbidden there).

Position delete files (spec: "Position Delete Files") have the columns ``file_path``
(field id 2147483546) and ``pos`` (2147483545), rows sorted by (path, pos).

Invariants:
- A position is an opaque int64 handed out by :meth:`PositionDeletes.positions_of`:
  ``(data file index << 40) | row``, so buffering deletes costs 8 bytes each and
  sorting them is one NumPy ``lexsort``.
- Nothing is written before :meth:`PositionDeletes.write`; it sorts every buffered
  delete once and rolls files at the delete target size. Each file's ``file_path``
  bounds are exact (never truncated): equal lower and upper bounds tell readers the
  file references one data file only, which is then also ``referenced_data_file``.
- Equality delete files hold the key columns (upsert) or the full row, with the
  table's field ids, and record the equality field ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from stream_sink.io.fileio import FileIO
from stream_sink.table.arrow import schema_to_arrow
from stream_sink.table.conversions import to_bytes
from stream_sink.table.deletion_vectors import VectorFor, write_deletion_vectors
from stream_sink.table.manifest import DataFile, DataFileContent
from stream_sink.table.metrics_config import DELETE_FILE_PATH_ID, DELETE_FILE_POS_ID, MetricsConfig
from stream_sink.table.schema import Schema
from stream_sink.table.types import LongType, NestedField, StringType
from stream_sink.write.config import ParquetOptions
from stream_sink.write.parquet import FileSpec
from stream_sink.write.rolling import RollingFileWriter, Segment

POSITION_DELETE_SCHEMA = Schema(
    NestedField(DELETE_FILE_PATH_ID, "file_path", StringType(), required=True),
    NestedField(DELETE_FILE_POS_ID, "pos", LongType(), required=True),
)
_POSITION_DELETE_ARROW = schema_to_arrow(POSITION_DELETE_SCHEMA)
_ROW_BITS = 40
_ROW_MASK = (1 << _ROW_BITS) - 1
_NO_POSITIONS = np.empty(0, dtype=np.int64)


def position_delete_spec(options: ParquetOptions, spec_id: int) -> FileSpec:
    return FileSpec(
        schema=POSITION_DELETE_SCHEMA,
        options=options,
        metrics=MetricsConfig.for_position_deletes(),
        content=DataFileContent.POSITION_DELETES,
        spec_id=spec_id,
    )


def equality_delete_spec(
    schema: Schema,
    equality_ids: Sequence[int],
    key_only: bool,
    options: ParquetOptions,
    metrics: MetricsConfig,
    spec_id: int,
) -> FileSpec:
    """Rows of the key columns (``key_only``, upsert) or of the full ``schema``."""
    names = [schema.find_column_name(i) for i in equality_ids]
    row_schema = schema.select(names) if key_only else schema
    return FileSpec(
        schema=row_schema,
        options=options,
        metrics=metrics,
        content=DataFileContent.EQUALITY_DELETES,
        spec_id=spec_id,
        equality_ids=tuple(sorted(equality_ids)),
    )


@dataclass(frozen=True)
class PositionDeleteFiles:
    files: tuple[DataFile, ...]
    referenced_data_files: tuple[str, ...]


class PositionDeletes:
    """Positions of rows one writer wrote, and the ones it deleted since (buffered)."""

    def __init__(self) -> None:
        self._paths: list[str] = []
        self._index: dict[str, int] = {}
        self._deleted: list[np.ndarray] = []

    def positions_of(self, segments: Sequence[Segment]) -> np.ndarray:
        """One position per written row, in input order, from a rolling writer's segments."""
        parts = []
        for s in segments:
            base = (self._path_index(s.file_path) << _ROW_BITS) + s.first_position
            parts.append(np.arange(base, base + s.length, dtype=np.int64))
        return np.concatenate(parts) if parts else _NO_POSITIONS

    def delete(self, positions: np.ndarray) -> None:
        if len(positions):
            self._deleted.append(positions)

    @property
    def count(self) -> int:
        return sum(len(p) for p in self._deleted)

    def write(self, open_writer: Callable[[], RollingFileWriter]) -> PositionDeleteFiles:
        """Sort and write every buffered delete through one new rolling writer."""
        if not self._deleted:
            return PositionDeleteFiles((), ())
        table, referenced = self._sorted_table()
        self._deleted.clear()
        writer = open_writer()
        segments = writer.write(table)
        paths = table.column("file_path")
        files = tuple(_with_path_bounds(f, paths, segments) for f in writer.complete())
        return PositionDeleteFiles(files, referenced)

    def write_vectors(
        self, location: Callable[[], str], io: FileIO, spec_id: int, partition: tuple[Any, ...]
    ) -> PositionDeleteFiles:
        """Every buffered delete as deletion vectors (one per data file) in one Puffin
        file at ``location()`` (asked only when there is something to write)."""
        if not self._deleted:
            return PositionDeleteFiles((), ())
        positions = np.concatenate(self._deleted)
        self._deleted.clear()
        files = positions >> _ROW_BITS
        rows = positions & _ROW_MASK
        vectors = [
            VectorFor(self._paths[i], spec_id, partition, rows[files == i])
            for i in np.unique(files).tolist()
        ]
        written = write_deletion_vectors(io, location(), vectors)
        return PositionDeleteFiles(tuple(written), tuple(v.data_file for v in vectors))

    def _path_index(self, path: str) -> int:
        index = self._index.get(path)
        if index is None:
            index = self._index[path] = len(self._paths)
            self._paths.append(path)
        return index

    def _sorted_table(self) -> tuple[pa.Table, tuple[str, ...]]:
        """The deletes sorted by (path, pos), and the data files they reference."""
        positions = np.concatenate(self._deleted)
        files = positions >> _ROW_BITS
        rows = positions & _ROW_MASK
        by_name = sorted(range(len(self._paths)), key=self._paths.__getitem__)
        rank = np.empty(len(self._paths), dtype=np.int64)
        rank[by_name] = np.arange(len(by_name))
        order = np.lexsort((rows, rank[files]))
        names = pa.array([self._paths[i] for i in by_name], pa.string())
        file_path = names.take(pa.array(rank[files][order]))
        table = pa.Table.from_arrays(
            [file_path, pa.array(rows[order], pa.int64())], schema=_POSITION_DELETE_ARROW
        )
        return table, tuple(self._paths[i] for i in np.unique(files).tolist())


def _with_path_bounds(f: DataFile, paths: pa.ChunkedArray, segments: Sequence[Segment]) -> DataFile:
    """``f`` with exact ``file_path`` bounds and, when it names one data file, that file."""
    mine = [s for s in segments if s.file_path == f.file_path]
    first = min(s.offset_in_input for s in mine)
    last = max(s.offset_in_input + s.length for s in mine) - 1
    lower, upper = str(paths[first].as_py()), str(paths[last].as_py())
    lower_bounds = dict(f.lower_bounds or {})
    upper_bounds = dict(f.upper_bounds or {})
    lower_bounds[DELETE_FILE_PATH_ID] = to_bytes(StringType(), lower)
    upper_bounds[DELETE_FILE_PATH_ID] = to_bytes(StringType(), upper)
    return replace(
        f,
        lower_bounds=lower_bounds,
        upper_bounds=upper_bounds,
        sort_order_id=None,
        referenced_data_file=lower if lower == upper else None,
    )
