"""Building tables for read tests: data files through our writers, delete files by hand.

Delete files are written here with pyarrow (field ids in the Parquet schema, the
spec's reserved ids for position deletes) so tests control exactly which rows,
partitions and sequence numbers they carry.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import stream_sink as ss
from stream_sink.io.fileio import FileIO
from stream_sink.table.arrow import schema_to_arrow
from stream_sink.table.catalog import Catalog
from stream_sink.table.conversions import to_bytes
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.table.table import Table
from stream_sink.table.types import LongType, StringType
from stream_sink.table.values import to_internal
from stream_sink.write.writer_factory import TaskWriterFactory

FILE_PATH_ID = 2147483546
POS_ID = 2147483545


def hadoop_catalog(root: Path) -> Catalog:
    catalog = ss.load_catalog(f"c{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    return catalog


def write_data(table: Table, rows: pa.Table) -> list[DataFile]:
    """Data files for ``rows`` written by our task writers, not committed."""
    writer = TaskWriterFactory.for_table(table).create(partition_id=0, task_id=0)
    writer.write(rows)
    return list(writer.complete().data_files)


def _write(table: Table, data: pa.Table) -> tuple[str, int]:
    path = f"{table.data_location}/deletes-{uuid.uuid4().hex}.parquet"
    with table.io.open_output(path) as out:
        pq.write_table(data, out)
    return path, table.io.size(path)


def position_deletes(
    table: Table,
    deletes: Sequence[tuple[str, int]],
    *,
    spec_id: int | None = None,
    partition: tuple[Any, ...] = (),
) -> DataFile:
    """A position delete file removing row ``pos`` of each ``(data file path, pos)``."""
    ordered = sorted(deletes)
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(FILE_PATH_ID)}),
            pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": str(POS_ID)}),
        ]
    )
    data = pa.table(
        {"file_path": [p for p, _ in ordered], "pos": [i for _, i in ordered]}, schema=schema
    )
    path, size = _write(table, data)
    paths = [p for p, _ in ordered]
    positions = [i for _, i in ordered]
    return DataFile(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        spec_id=table.spec().spec_id if spec_id is None else spec_id,
        partition=partition,
        record_count=len(ordered),
        file_size_in_bytes=size,
        lower_bounds={
            FILE_PATH_ID: to_bytes(StringType(), min(paths)),
            POS_ID: to_bytes(LongType(), min(positions)),
        },
        upper_bounds={
            FILE_PATH_ID: to_bytes(StringType(), max(paths)),
            POS_ID: to_bytes(LongType(), max(positions)),
        },
    )


def equality_deletes(
    table: Table,
    keys: pa.Table,
    *,
    spec_id: int | None = None,
    partition: tuple[Any, ...] = (),
) -> DataFile:
    """An equality delete file over the columns of ``keys`` (named as in the table)."""
    schema = table.schema()
    arrow = schema_to_arrow(schema.select(keys.column_names))
    data = pa.Table.from_arrays(
        [keys.column(f.name).cast(f.type) for f in arrow],
        schema=pa.schema([f.with_nullable(True) for f in arrow]),
    )
    path, size = _write(table, data)
    ids = tuple(schema.find_field(n).field_id for n in keys.column_names)
    lower, upper = {}, {}
    nulls = {fid: data.column(n).null_count for fid, n in zip(ids, keys.column_names, strict=True)}
    for fid, name in zip(ids, keys.column_names, strict=True):
        values = [v for v in to_internal(data.column(name), schema.find_type(fid)) if v is not None]
        if values:
            lower[fid] = to_bytes(schema.find_type(fid), min(values))
            upper[fid] = to_bytes(schema.find_type(fid), max(values))
    return DataFile(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        spec_id=table.spec().spec_id if spec_id is None else spec_id,
        partition=partition,
        record_count=keys.num_rows,
        file_size_in_bytes=size,
        value_counts=dict.fromkeys(ids, keys.num_rows),
        null_value_counts=nulls,
        lower_bounds=lower,
        upper_bounds=upper,
        equality_ids=ids,
    )


def row_delta(table: Table, data: Sequence[DataFile] = (), deletes: Sequence[DataFile] = ()) -> int:
    """Commit one row delta; returns the new snapshot id."""
    op = table.new_row_delta()
    for f in data:
        op.add_rows(f)
    for d in deletes:
        op.add_deletes(d)
    return op.commit().snapshot_id


def sort_rows(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r[key] is None, r[key], repr(sorted(r.items()))))


def rows_of(table: pa.Table, key: str) -> list[dict[str, Any]]:
    return sort_rows(table.to_pylist(maps_as_pydicts="strict"), key)


@dataclass(frozen=True)
class CountingIO(FileIO):
    """A local FileIO that records every file opened for reading (Parquet files)."""

    opened: list[str] = field(default_factory=list, compare=False)

    def open_input(self, location: str) -> pa.NativeFile:
        self.opened.append(location)
        return super().open_input(location)


def duckdb_rows_at(metadata_location: str, snapshot_id: int, con: Any) -> list[dict[str, Any]]:
    """The rows DuckDB's iceberg_scan reads at ``snapshot_id`` over connection ``con``."""
    loc = metadata_location.replace("'", "''")
    cur = con.execute(f"SELECT * FROM iceberg_scan('{loc}', snapshot_from_id={snapshot_id})")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def assert_same_as_duckdb(table: Table, key: str) -> None:
    """Our rows equal DuckDB's iceberg_scan at every snapshot of ``table``."""
    from readers import duckdb_connection

    table.refresh()
    con = duckdb_connection()
    try:
        for snap in table.snapshots():
            ours = rows_of(table.scan(snapshot_id=snap.snapshot_id).to_arrow(), key)
            theirs = sort_rows(duckdb_rows_at(table.metadata_location, snap.snapshot_id, con), key)
            assert ours == theirs, f"snapshot {snap.snapshot_id} ({snap.operation})"
    finally:
        con.close()
