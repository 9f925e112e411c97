"""One Parquet file: Arrow data in, a DataFile with its column metrics out.

Invariants:
- The file's schema is the Iceberg schema's Arrow form, so every column carries
  its ``PARQUET:field_id``; data handed to :meth:`ParquetAppender.write` must already
  be in that form (see ``conform_to_schema``).
- Row groups are cut by Arrow bytes at ``row_group_bytes``; until a row group is
  written its rows stay buffered here (zero-copy references to the input).
- Metrics come from the footer. The only work done on the data itself is the NaN
  count of float/double columns (vectorized, per batch); a column whose footer has
  no usable bounds (e.g. strings longer than Parquet's statistics limit) is read
  back from the finished file to compute them with ``pyarrow.compute.min_max``.
- Dictionary encoding per column as parquet-mr (Iceberg Java's writer) ends up with:
  the Parquet writer is opened at the first row group, which decides which flat columns
  keep a dictionary (:func:`~stream_sink.parquet.dictionary.dictionary_columns`, within
  ``write.parquet.dict-size-bytes`` when set); the rest of the file follows that choice.
- ``abort`` closes and deletes the file; it is safe after any failure and repeatable.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from stream_sink.exceptions import UnsupportedError
from stream_sink.io import FileIO
from stream_sink.io.errors import io_failure, quietly
from stream_sink.parquet.dictionary import dictionary_columns
from stream_sink.table.arrow import schema_to_arrow
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.table.metrics_config import MetricsConfig
from stream_sink.table.schema import Schema
from stream_sink.table.types import DoubleType, FloatType, UnknownType, v3_types_in
from stream_sink.table.values import to_internal
from stream_sink.write.column_stats import ColumnStatsPlan, footer_column_stats, serialize_bounds
from stream_sink.write.config import ParquetOptions
from stream_sink.write.leaves import LeafPath, leaf_paths, leaf_values


@dataclass(frozen=True)
class FileSpec:
    """The kind of file to write: schema, encoding, metrics and manifest attributes."""

    schema: Schema
    options: ParquetOptions
    metrics: MetricsConfig
    content: DataFileContent = DataFileContent.DATA
    spec_id: int = 0
    equality_ids: tuple[int, ...] | None = None
    sort_order_id: int | None = None

    @cached_property
    def stored_schema(self) -> Schema:
        """The columns the file holds: the schema without its ``unknown`` columns
        (always null, never stored in data files, per the spec)."""
        return stored_columns(self.schema)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        return schema_to_arrow(self.stored_schema)

    @cached_property
    def plan(self) -> ColumnStatsPlan:
        return ColumnStatsPlan.build(self.stored_schema, self.metrics)

    @cached_property
    def leaf_paths(self) -> dict[int, LeafPath]:
        return leaf_paths(self.stored_schema)


def stored_columns(schema: Schema) -> Schema:
    """``schema`` without its top-level ``unknown`` columns; one nested in a struct,
    list or map is refused (not supported yet)."""
    kept = [f for f in schema.fields if not isinstance(f.field_type, UnknownType)]
    for f in kept:
        nested = v3_types_in(f.field_type)
        if "unknown" in nested:
            raise UnsupportedError(
                f"column {f.name!r} holds a field of type unknown inside a nested type: "
                "not supported yet (add the unknown column at the top level)"
            )
    if len(kept) == len(schema.fields):
        return schema
    ids = [i for i in schema.identifier_field_ids if any(f.field_id == i for f in kept)]
    return Schema(*kept, schema_id=schema.schema_id, identifier_field_ids=ids)


# Below this many rows per buffered piece on average, pieces are joined before encoding.
_SMALL_CHUNK_ROWS = 65_536


class ParquetAppender:
    """Writes one Parquet file at ``location``; ``close`` returns its DataFile."""

    def __init__(
        self,
        io: FileIO,
        location: str,
        spec: FileSpec,
        partition: tuple[Any, ...] = (),
        compression_ratio: float | None = None,
    ) -> None:
        self.location = location
        self._io = io
        self._spec = spec
        self._partition = partition
        self._arrow_schema = spec.arrow_schema
        self._plan, self._paths = spec.plan, spec.leaf_paths
        self._nan_counts = dict.fromkeys(self._plan.nan_ids, 0)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._flushed_arrow_bytes = 0
        self._ratio_hint = compression_ratio
        self.rows = 0
        self._closed = False
        self._stream: Any = None
        self._writer: pq.ParquetWriter | None = None
        try:
            with io_failure("creating data file", location):
                self._stream = io.open_output(location)
        except BaseException:
            self.abort()
            raise

    # --- writing ----------------------------------------------------------------------

    def write(self, data: pa.Table, nbytes: int | None = None, nan_free: bool = False) -> None:
        """Append rows (already in the file's Arrow schema); ``nbytes``: their Arrow size
        when the caller knows it; ``nan_free``: the caller checked that no float column
        of ``data`` holds a NaN (:func:`has_nan`), so they need not be counted."""
        if data.num_rows == 0:
            return
        if data.num_columns != len(self._arrow_schema):  # unknown columns are not stored
            data = data.select(self._arrow_schema.names)
        if not nan_free:
            for fid in self._plan.nan_ids:
                self._nan_counts[fid] += count_nan(data, self._paths[fid])
        self._pending.append(data)
        self._pending_rows += data.num_rows
        self._pending_bytes += data.nbytes if nbytes is None else nbytes
        self.rows += data.num_rows
        if self._pending_bytes >= self._spec.options.row_group_bytes:
            self._write_row_groups(final=False)

    def flush(self) -> None:
        """Write every buffered row as a row group now (frees the buffer)."""
        self._write_row_groups(final=True)

    @property
    def buffered_bytes(self) -> int:
        return self._pending_bytes

    def _write_row_groups(self, final: bool) -> None:
        if not self._pending_rows:
            return
        with io_failure("writing data file", self.location):
            self._write_pending(final)

    def _open_writer(self, first: pa.Table) -> pq.ParquetWriter:
        """The Parquet writer, opened for the file's first row group ``first`` (whose
        rows choose the dictionary-encoded columns)."""
        if self._writer is None:
            opts = self._spec.options
            use_dictionary = dictionary_columns(first, opts.dict_page_bytes)
            self._writer = pq.ParquetWriter(
                self._stream,
                self._arrow_schema,
                use_dictionary=use_dictionary,
                **opts.writer_kwargs(),
            )
        return self._writer

    def _write_pending(self, final: bool) -> None:
        table = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        if len(self._pending) > 1 and self._pending_rows < _SMALL_CHUNK_ROWS * len(self._pending):
            table = table.combine_chunks()  # many small pieces encode much slower than one
        per_row = max(self._pending_bytes / self._pending_rows, 1e-9)
        group_rows = max(1, int(self._spec.options.row_group_bytes / per_row))
        start = 0
        while table.num_rows - start >= group_rows or (final and start < table.num_rows):
            part = table.slice(start, group_rows)
            self._open_writer(part).write_table(part, row_group_size=part.num_rows)
            self._flushed_arrow_bytes += part.nbytes
            start += part.num_rows
        rest = table.slice(start)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows
        self._pending_bytes = rest.nbytes if rest.num_rows else 0

    # --- size -------------------------------------------------------------------------

    @property
    def compression_ratio(self) -> float | None:
        """File bytes per Arrow byte of the row groups written so far (None before any)."""
        if not self._flushed_arrow_bytes:
            return self._ratio_hint
        return max(self._stream.tell(), 1) / self._flushed_arrow_bytes

    def estimated_size(self, measure: bool = False) -> int:
        """Bytes written plus buffered bytes scaled by the compression seen so far.

        With ``measure`` and no row group written yet (the ratio unknown), the buffer
        is written out first so the estimate rests on real bytes."""
        if measure and not self._flushed_arrow_bytes and self._ratio_hint is None:
            self.flush()
        ratio = self.compression_ratio
        return int(self._stream.tell() + self._pending_bytes * (1.0 if ratio is None else ratio))

    # --- finishing ----------------------------------------------------------------------

    def close(self) -> DataFile:
        """Finish the file and return its DataFile (with metrics)."""
        if self._closed:
            raise RuntimeError(f"{self.location} is already closed")
        self.flush()
        with io_failure("writing data file", self.location):
            writer = self._open_writer(self._arrow_schema.empty_table())
            writer.close()
            size = self._stream.tell()
            self._stream.close()
        self._closed = True
        return self._data_file(writer.writer.metadata, size)

    def abort(self) -> None:
        """Close without finishing and delete the file."""
        if not self._closed:
            self._closed = True
            for closer in (self._writer, self._stream):
                try:
                    if closer is not None:
                        closer.close()
                except Exception:
                    pass
        self._pending = []
        quietly(lambda: self._io.delete(self.location), f"deleting aborted file {self.location}")

    def _data_file(self, md: pq.FileMetaData, size: int) -> DataFile:
        m = footer_column_stats(md, self._plan)
        counts = (m.value_counts, m.null_value_counts, self._nan_counts)
        unresolved = {fid for fid in m.unresolved if not all_nan_or_null(fid, *counts)}
        if unresolved:
            lo, hi = bounds_from_file(self._io, self.location, self._spec, unresolved)
            m.lower.update(lo)
            m.upper.update(hi)
        lower, upper = serialize_bounds(m.lower, m.upper, self._plan)
        s = self._spec
        return DataFile(
            content=s.content,
            file_path=self.location,
            file_format=FileFormat.PARQUET,
            spec_id=s.spec_id,
            partition=tuple(self._partition),
            record_count=md.num_rows,
            file_size_in_bytes=size,
            column_sizes=m.column_sizes,
            value_counts=m.value_counts,
            null_value_counts=m.null_value_counts,
            nan_value_counts=dict(self._nan_counts),
            lower_bounds=lower,
            upper_bounds=upper,
            split_offsets=tuple(m.split_offsets),
            equality_ids=s.equality_ids,
            sort_order_id=s.sort_order_id,
        )


def bounds_from_file(
    io: FileIO, location: str, spec: FileSpec, ids: set[int]
) -> tuple[dict[int, Any], dict[int, Any]]:
    """min/max (internal values, NaN left out) of the fields ``ids`` computed from the
    data of the finished file at ``location`` (for fields whose footer had none)."""
    arrow_schema, paths, plan = spec.arrow_schema, spec.leaf_paths, spec.plan
    tops = sorted({int(paths[fid][0]) for fid in ids})
    names = [arrow_schema.field(i).name for i in tops]
    with io.open_input(location) as f:
        table = pq.read_table(f, columns=names, schema=arrow_schema)
    lower: dict[int, Any] = {}
    upper: dict[int, Any] = {}
    for fid in ids:
        path = paths[fid]
        local = (tops.index(int(path[0])), *path[1:])
        t = plan.types[fid]
        arrays = list(leaf_values(table, local))
        values = pa.chunked_array(arrays) if arrays else None
        if values is None or len(values) == 0:
            continue
        if isinstance(t, (FloatType, DoubleType)):
            values = values.filter(pc.invert(pc.is_nan(values)))
        mm = pc.min_max(values)
        lo, hi = mm["min"], mm["max"]
        if lo.is_valid:
            lower[fid] = to_internal(pa.array([lo.as_py()], values.type), t)[0]
            upper[fid] = to_internal(pa.array([hi.as_py()], values.type), t)[0]
    return lower, upper


def has_nan(data: pa.Table, spec: FileSpec) -> bool:
    """Whether any float/double column of ``data`` (in ``spec``'s Arrow form) holds a NaN:
    one pass over a whole batch instead of one per partition slice of it."""
    if data.num_columns != len(spec.arrow_schema):  # unknown columns are not stored
        data = data.select(spec.arrow_schema.names)
    return any(count_nan(data, spec.leaf_paths[fid]) for fid in spec.plan.nan_ids)


def count_nan(data: pa.Table, path: LeafPath) -> int:
    """NaN values of the float/double leaf at ``path`` of ``data``."""
    total = 0
    for arr in leaf_values(data, path):
        if not len(arr) or arr.null_count == len(arr):
            continue
        if arr.null_count == 0:  # zero-copy view; numpy is cheaper per call than Arrow compute
            total += int(np.count_nonzero(np.isnan(arr.to_numpy())))
        else:
            total += pc.sum(pc.is_nan(arr)).as_py() or 0
    return int(total)


def all_nan_or_null(
    fid: int,
    values: dict[int, int],
    nulls: dict[int, int],
    nans: dict[int, int],
) -> bool:
    """A float column whose every value is NaN or null has no bounds to compute."""
    if fid not in nans or fid not in nulls:
        return False
    return values.get(fid, 0) - nulls[fid] - nans[fid] <= 0
