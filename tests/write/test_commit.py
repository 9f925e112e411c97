"""Committing a WriteResult without Spark: append, or row delta when there are deletes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from readers import duckdb_rows, pyiceberg_rows

from stream_sink.exceptions import CommitValidationError
from stream_sink.io import FileIO
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFile, DataFileContent
from stream_sink.table.metrics_config import DELETE_FILE_PATH_ID, DELETE_FILE_POS_ID, MetricsConfig
from stream_sink.table.schema import Schema
from stream_sink.table.table import Table
from stream_sink.table.types import LongType, NestedField, StringType
from stream_sink.write.config import WriteConfig
from stream_sink.write.parquet import FileSpec, ParquetAppender
from stream_sink.write.result import WriteResult
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), ("data", pa.string())])
POS_DELETE_SCHEMA = Schema(
    NestedField(DELETE_FILE_PATH_ID, "file_path", StringType(), True),
    NestedField(DELETE_FILE_POS_ID, "pos", LongType(), True),
)


def write(table: Table, ids: range) -> WriteResult:
    writer = TaskWriterFactory.for_table(table).create(0, 0)
    writer.write(pa.table({"id": ids, "data": [f"d{i}" for i in ids]}, schema=ARROW))
    return writer.complete()


def position_deletes(tmp_path: Path, target: DataFile, positions: list[int]) -> DataFile:
    spec = FileSpec(
        POS_DELETE_SCHEMA,
        WriteConfig().parquet,
        MetricsConfig.for_position_deletes(),
        content=DataFileContent.POSITION_DELETES,
    )
    location = str(tmp_path / "wh" / "db" / "t" / "data" / "del.parquet")
    appender = ParquetAppender(FileIO(), location, spec)
    appender.write(
        pa.table(
            {"file_path": [target.file_path] * len(positions), "pos": positions},
            schema=spec.arrow_schema,
        )
    )
    return appender.close()


def test_a_result_without_deletes_is_an_append(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW)
    snap = commit_write_result(table, write(table, range(10)), snapshot_properties={"k": "v"})
    assert snap.summary["operation"] == "append"
    assert snap.summary["k"] == "v"
    assert snap.summary["added-records"] == "10"
    assert sorted(r["id"] for r in duckdb_rows(table.metadata_location)) == list(range(10))


def test_a_result_with_deletes_is_a_row_delta(catalog: Catalog, tmp_path: Path) -> None:
    table = catalog.create_table("db.t", ARROW)
    first = write(table, range(10))
    commit_write_result(table, first)
    target = first.data_files[0]
    deletes = position_deletes(tmp_path, target, [0, 3, 9])
    assert deletes.lower_bounds is not None and deletes.upper_bounds is not None
    assert deletes.lower_bounds[DELETE_FILE_PATH_ID] == target.file_path.encode()
    assert deletes.upper_bounds[DELETE_FILE_POS_ID] == (9).to_bytes(8, "little")
    second = write(table, range(10, 12))
    result = WriteResult(second.data_files, (deletes,), (target.file_path,))
    snap = commit_write_result(table, result)
    assert snap.summary["operation"] == "overwrite"
    assert snap.summary["added-position-deletes"] == "3"
    expected = [1, 2, 4, 5, 6, 7, 8, 10, 11]
    assert sorted(r["id"] for r in duckdb_rows(table.metadata_location)) == expected
    assert sorted(r["id"] for r in pyiceberg_rows(table.metadata_location)) == expected


def test_row_delta_refuses_deletes_of_a_removed_data_file(catalog: Catalog, tmp_path: Path) -> None:
    table = catalog.create_table("db.t", ARROW)
    first = write(table, range(5))
    commit_write_result(table, first)
    start = table.current_snapshot()
    assert start is not None
    target = first.data_files[0]
    table.new_overwrite().delete_file(target).commit()  # someone removes the file meanwhile
    deletes = position_deletes(tmp_path, target, [1])
    with pytest.raises(CommitValidationError, match="removed"):
        commit_write_result(
            table,
            WriteResult((), (deletes,), (target.file_path,)),
            starting_snapshot_id=start.snapshot_id,
        )
