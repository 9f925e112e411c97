"""A sequence of Parquet files for one partition, rolled at a target size (Java's
RollingDataWriter / BaseRollingWriter).

Invariants:
- The size is checked whenever the current file's row count reaches a multiple of
  ``check_rows`` (Java: every 1,000 rows); a file is rolled at the first check where
  its estimated size is at least ``target_bytes``. Within one input table the check
  points are found arithmetically from its bytes per row, so the input is sliced
  only where a roll happens, never row by row.
- ``write`` reports where every input row landed as :class:`Segment` s, in input
  order and without gaps.
- Every location handed out by the factory is remembered before the file is
  opened, so ``abort`` deletes everything this writer created, even after a failure.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import pyarrow as pa

from stream_sink.io import FileIO
from stream_sink.table.manifest import DataFile
from stream_sink.write.file_factory import OutputFileFactory
from stream_sink.write.parquet import FileSpec, ParquetAppender


class Segment(NamedTuple):
    """Input rows ``[offset_in_input, offset_in_input + length)`` are rows
    ``[first_position, first_position + length)`` of ``file_path``."""

    file_path: str
    first_position: int
    offset_in_input: int
    length: int


class RollingFileWriter:
    def __init__(
        self,
        io: FileIO,
        factory: OutputFileFactory,
        spec: FileSpec,
        target_bytes: int,
        *,
        partition: tuple[Any, ...] = (),
        check_rows: int = 1000,
        suffix: str | None = None,
    ) -> None:
        self._io = io
        self._factory = factory
        self._spec = spec
        self._target = target_bytes
        self._partition = partition
        self._check_rows = max(1, check_rows)
        self._suffix = suffix
        self._current: ParquetAppender | None = None
        self._ratio: float | None = None
        self._completed: list[DataFile] = []
        self._paths: list[str] = []

    @property
    def partition(self) -> tuple[Any, ...]:
        return self._partition

    @property
    def buffered_bytes(self) -> int:
        return self._current.buffered_bytes if self._current else 0

    def flush(self) -> None:
        """Write the current file's buffered rows out as a row group (frees memory)."""
        if self._current:
            self._current.flush()

    # --- writing ------------------------------------------------------------------------

    def write(
        self, data: pa.Table, nan_free: bool = False, nbytes: int | None = None
    ) -> list[Segment]:
        """Append ``data`` (in the file schema); returns where its rows went. ``nan_free``:
        see :meth:`ParquetAppender.write`; ``nbytes``: ``data.nbytes`` when the caller
        has it already."""
        segments: list[Segment] = []
        n = data.num_rows
        per_row = (data.nbytes if nbytes is None else nbytes) / max(n, 1)
        offset = 0
        while offset < n:
            appender = self._current or self._open()
            take = self._rows_to_next_roll(appender, per_row, n - offset)
            segments.append(Segment(appender.location, appender.rows, offset, take))
            piece = data.slice(offset, take) if take < n else data
            appender.write(piece, int(per_row * take), nan_free)
            offset += take
            if appender.rows % self._check_rows == 0 and self._reached_target(appender):
                self.roll()
        return segments

    def _rows_to_next_roll(self, appender: ParquetAppender, row_bytes: float, left: int) -> int:
        """Rows up to the first check point where the file is predicted to be full."""
        ratio = appender.compression_ratio or 1.0
        per_row = max(row_bytes, 1e-9) * ratio
        room = self._target - appender.estimated_size()
        needed = max(1, math.ceil(room / per_row))
        check = self._check_rows
        stop = math.ceil((appender.rows + needed) / check) * check
        return min(left, stop - appender.rows)

    def _reached_target(self, appender: ParquetAppender) -> bool:
        if appender.estimated_size() < self._target:
            return False
        return appender.estimated_size(measure=True) >= self._target

    def _open(self) -> ParquetAppender:
        location = self._factory.new_location(self._partition or None, self._suffix)
        self._paths.append(location)
        appender = ParquetAppender(self._io, location, self._spec, self._partition, self._ratio)
        self._current = appender
        return appender

    def roll(self) -> None:
        """Finish the current file (if any); the next row opens a new one."""
        appender, self._current = self._current, None
        if appender is None:
            return
        if appender.rows == 0:
            appender.abort()
            self._paths.remove(appender.location)
            return
        self._ratio = appender.compression_ratio or self._ratio
        self._completed.append(appender.close())

    # --- finishing ------------------------------------------------------------------------

    def complete(self) -> list[DataFile]:
        """Finish the current file; every file written, in order."""
        self.roll()
        return list(self._completed)

    def abort(self) -> None:
        """Delete every file this writer created (finished or not)."""
        current, self._current = self._current, None
        if current is not None:
            current.abort()
        for path in self._paths:
            self._io.delete(path)
        self._paths.clear()
        self._completed.clear()
