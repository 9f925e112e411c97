"""Writing Arrow rows as Delta data files: Parquet without the partition columns, one
or more files per partition, each described by an :class:`AddFile` with statistics.

Invariants: every file is complete on storage before its AddFile is returned (nothing
refers to a partial file); file names are unique (a UUID), so a re-run never overwrites
a file an earlier attempt may have committed. Under column mapping (``mapping``) files
name columns by their physical names and carry the column ids as Parquet field ids, and
partition values and statistics are keyed by physical names.
"""

from __future__ import annotations

import contextlib
import io as _io
import time
import uuid
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from stream_sink.exceptions import SchemaMismatchError
from stream_sink.io.fileio import FileIO
from stream_sink.parquet.dictionary import dictionary_columns

from .actions import AddFile
from .column_mapping import ColumnMapping
from .paths import absolute_location, encode_path, partition_dir, serialize_partition_value
from .stats import file_stats

DEFAULT_TARGET_FILE_ROWS = 4_000_000


def conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` with the table's columns in the table's order and types."""
    missing = [f.name for f in schema if f.name not in data.column_names]
    if missing:
        raise SchemaMismatchError(f"rows lack the table's columns {missing}")
    extra = [n for n in data.column_names if schema.get_field_index(n) < 0]
    if extra:
        raise SchemaMismatchError(f"rows carry columns {extra} the table does not have")
    cols = []
    for f in schema:
        col = data.column(f.name)
        if col.type != f.type:
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaMismatchError(
                    f"column {f.name!r}: {col.type} cannot be written as {f.type} ({e})"
                ) from None
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=schema.remove_metadata())


def write_data_files(
    location: str,
    data: pa.Table,
    schema: pa.Schema,
    partition_columns: Sequence[str],
    *,
    io: FileIO | None = None,
    target_file_rows: int = DEFAULT_TARGET_FILE_ROWS,
    mapping: ColumnMapping | None = None,
) -> list[AddFile]:
    """Write ``data`` (conformed to ``schema``) under the table root ``location``; a
    failure deletes the files written so far before it propagates."""
    if data.num_rows == 0:
        return []
    io = io or FileIO.for_location(location)
    mapping = mapping or ColumnMapping("")
    data = conform(data, schema)
    out: list[AddFile] = []
    try:
        if not partition_columns:
            _write_piece(location, io, mapping.to_physical(data), {}, "", target_file_rows, out)
            return out
        physical = [mapping.physical_name(c) for c in partition_columns]
        for values, piece in _split(data, partition_columns):
            values = {mapping.physical_name(c): v for c, v in values.items()}
            rel_dir = partition_dir(physical, values)
            _write_piece(
                location,
                io,
                mapping.to_physical(piece.drop_columns(list(partition_columns))),
                values,
                rel_dir,
                target_file_rows,
                out,
            )
    except BaseException:
        for a in out:
            with contextlib.suppress(Exception):  # an orphan is harmless
                io.delete(absolute_location(location, a.path))
        raise
    return out


def _split(data: pa.Table, columns: Sequence[str]) -> list[tuple[dict[str, str | None], pa.Table]]:
    indexed = data.append_column("__row", pa.array(range(data.num_rows), pa.int64()))
    groups = indexed.group_by(list(columns), use_threads=False).aggregate([("__row", "list")])
    out = []
    for i in range(groups.num_rows):
        values = {
            c: serialize_partition_value(groups.column(c)[i].as_py(), data.schema.field(c).type, c)
            for c in columns
        }
        rows = groups.column("__row_list")[i].values
        out.append((values, data.take(pc.cast(rows, pa.int64()))))
    return out


def _write_piece(
    location: str,
    io: FileIO,
    data: pa.Table,
    values: dict[str, str | None],
    rel_dir: str,
    target_rows: int,
    out: list[AddFile],
) -> None:
    """Append each file written to ``out`` (as soon as it is written)."""
    for start in range(0, data.num_rows, target_rows):
        chunk = data.slice(start, target_rows)
        name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
        rel = f"{rel_dir}/{name}" if rel_dir else name
        buf = _io.BytesIO()
        pq.write_table(
            chunk,
            buf,
            compression="snappy",
            use_dictionary=dictionary_columns(chunk),
            write_page_index=True,  # as parquet-mr writes: readers can skip pages
        )
        payload = buf.getvalue()
        io.write_bytes(f"{location.rstrip('/')}/{rel}", payload)
        out.append(
            AddFile(
                path=encode_path(rel),
                partition_values=dict(values),
                size=len(payload),
                modification_time=int(time.time() * 1000),
                data_change=True,
                stats=file_stats(chunk),
            )
        )
