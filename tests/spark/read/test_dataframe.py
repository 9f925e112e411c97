"""Reading tables through Spark: a partitioned table with position and equality deletes
and every kind of column, read by ``read_table`` on executors, must equal
``table.scan().to_arrow()`` row for row, at every snapshot, with projections and filters.

Tests stream_sink.spark.read.tasks: the splits executors read.
Tests stream_sink.spark.read.types: Iceberg types as Spark's."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.exceptions import MissingFileError, NoSuchSnapshotError, ValidationError
from stream_sink.read import IncrementalAppendScan
from stream_sink.spark import read_table
from stream_sink.spark.errors import find_stream_sink_error
from stream_sink.spark.read.dataframe import read_scan
from stream_sink.table.arrow import schema_to_arrow
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFileContent
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    BinaryType,
    DateType,
    DecimalType,
    FixedType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from stream_sink.tables import IcebergTable
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "tstz", TimestamptzType()),
    NestedField(5, "amount", DecimalType(10, 2)),
    NestedField(6, "payload", BinaryType()),
    NestedField(7, "code", FixedType(4)),
    NestedField(8, "uid", UUIDType()),
    NestedField(9, "day", DateType()),
    NestedField(10, "at", TimeType()),
    NestedField(
        11,
        "point",
        StructType(
            NestedField(12, "x", IntegerType(), required=True),
            NestedField(13, "label", StringType()),
        ),
    ),
    NestedField(14, "tags", ListType(15, StringType())),
    NestedField(16, "attrs", MapType(17, StringType(), 18, LongType())),
).with_identifier_fields(["id"])
ARROW = schema_to_arrow(SCHEMA)
T0 = dt.datetime(2024, 5, 1, 8, 30)


def row(i: int, version: int = 0) -> dict[str, Any]:
    null = i % 7 == 3
    return {
        "id": i,
        "name": None if null else f"n{i}-v{version}",
        "ts": T0 + dt.timedelta(minutes=i),
        "tstz": (T0 + dt.timedelta(hours=i)).replace(tzinfo=dt.timezone.utc),
        "amount": decimal.Decimal(i * 100 + version).scaleb(-2),
        "payload": None if null else bytes([i % 256, version]),
        "code": i.to_bytes(4, "big"),
        "uid": None if null else uuid.UUID(int=i * 7919 + version).bytes,
        "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
        "at": dt.time(i % 24, i % 60, 0, i),
        "point": None if null else {"x": i, "label": None if i % 2 else f"p{i}"},
        "tags": None if null else [f"t{j}" for j in range(i % 3)],
        "attrs": None if null else [("v", version), ("i", i)],
    }


def rows(items: list[dict[str, Any]], kind: str | None = None) -> pa.Table:
    data = pa.Table.from_pylist(items, schema=ARROW)
    if kind is None:
        return data
    return data.append_column("_row_kind", pa.array([kind] * len(items), pa.string()))


def upsert(table: IcebergTable, batch: pa.Table) -> None:
    """One delta task (upsert by id) committed as one row delta."""
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
    writer = factory.create(0, 0)
    writer.write(batch)
    commit_write_result(table, writer.complete())


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    root = tmp_path_factory.mktemp("spark_read")
    catalog = ss.load_catalog("spark_read", type="hadoop", warehouse=str(root / "warehouse"))
    catalog.create_namespace("db")
    return catalog


@pytest.fixture(scope="module")
def table(catalog: Catalog) -> IcebergTable:
    """Snapshot 1: ids 0..59 appended; snapshot 2: an upsert rewriting ids 0..19 (equality
    deletes), deleting 20..24, inserting 60..69 and rewriting 60..64 again in the same task
    (position deletes); snapshot 3: an append of 70..79."""
    t = catalog.create_table("db.wide", schema=SCHEMA, partition_spec=[("bucket", "id", 4)])
    assert isinstance(t, IcebergTable)
    t.append(rows([row(i) for i in range(60)]))
    batch = pa.concat_tables(
        [
            rows([row(i, 1) for i in range(20)], "+U"),
            rows([row(i) for i in range(20, 25)], "-D"),
            rows([row(i, 1) for i in range(60, 70)], "+I"),
            rows([row(i, 2) for i in range(60, 65)], "+U"),
        ]
    )
    upsert(t, batch)
    t.append(rows([row(i) for i in range(70, 80)]))
    return t


def spark_rows(df: Any) -> list[dict[str, Any]]:
    return sorted(df.toArrow().to_pylist(), key=lambda r: r["id"])


def expected_rows(scan: Any) -> list[dict[str, Any]]:
    """``scan.to_arrow()`` rows as Spark shows them: uuids as canonical strings, times
    as microseconds since midnight (Spark's TIME type is off by default)."""
    out = []
    for r in scan.to_arrow().to_pylist():
        if r.get("uid") is not None:
            r["uid"] = str(uuid.UUID(bytes=r["uid"]))
        if r.get("at") is not None:
            t = r["at"]
            r["at"] = ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond
        out.append(r)
    return sorted(out, key=lambda r: r["id"])


def test_table_with_position_and_equality_deletes_reads_as_local_scan(
    spark: Any, table: IcebergTable
) -> None:
    kinds = {f.content for f in _delete_files(table)}
    assert kinds == {DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES}

    df = read_table(spark, table)
    got = spark_rows(df)

    assert got == expected_rows(table.scan())
    assert [r["id"] for r in got] == [*range(20), *range(25, 80)]
    assert {r["name"] for r in got if r["id"] in (0, 61, 68)} == {"n0-v1", "n61-v2", "n68-v1"}


def test_spark_schema_maps_every_iceberg_type(spark: Any, table: IcebergTable) -> None:
    from pyspark.sql import types as st

    schema = read_table(spark, table).schema
    by_name = {f.name: f for f in schema.fields}
    assert by_name["id"].dataType == st.LongType() and not by_name["id"].nullable
    assert by_name["ts"].dataType == st.TimestampNTZType()
    assert by_name["tstz"].dataType == st.TimestampType()
    assert by_name["amount"].dataType == st.DecimalType(10, 2)
    assert by_name["payload"].dataType == st.BinaryType()
    assert by_name["code"].dataType == st.BinaryType()
    assert by_name["uid"].dataType == st.StringType()
    assert by_name["at"].dataType == st.LongType()
    assert by_name["point"].dataType == st.StructType(
        [
            st.StructField("x", st.IntegerType()),
            st.StructField("label", st.StringType()),
        ]
    )
    assert by_name["tags"].dataType == st.ArrayType(st.StringType(), True)
    assert by_name["attrs"].dataType == st.MapType(st.StringType(), st.LongType(), True)


def test_time_columns_read_as_spark_time_when_enabled(spark: Any, table: IcebergTable) -> None:
    from pyspark.sql import types as st

    spark.conf.set("spark.sql.timeType.enabled", "true")
    try:
        df = read_table(spark, table, columns=["id", "at"], row_filter="id < 3")
        assert df.schema["at"].dataType == st.TimeType(6)
        got = spark_rows(df)
    finally:
        spark.conf.unset("spark.sql.timeType.enabled")
    assert got == [{"id": i, "at": row(i)["at"]} for i in range(3)]


def test_time_travel_reads_each_snapshot(spark: Any, table: IcebergTable) -> None:
    first, second, _ = table.snapshots()
    for snap in (first, second):
        got = spark_rows(read_table(spark, table, snapshot_id=snap.snapshot_id))
        assert got == expected_rows(table.scan(snapshot_id=snap.snapshot_id))
    assert len(spark_rows(read_table(spark, table, snapshot_id=first.snapshot_id))) == 60


def test_incremental_append_scan_reads_through_spark(spark: Any, table: IcebergTable) -> None:
    _, second, third = table.snapshots()
    scan = IncrementalAppendScan(table, second.snapshot_id, third.snapshot_id)
    got = spark_rows(read_scan(spark, scan))
    assert got == expected_rows(scan)
    assert [r["id"] for r in got] == list(range(70, 80))


def test_projection_and_filter(spark: Any, table: IcebergTable) -> None:
    where = "id >= 10 and id < 65 and name is not null"
    df = read_table(spark, table, columns=["id", "name", "tstz"], row_filter=where)

    assert df.columns == ["id", "name", "tstz"]
    got = spark_rows(df)
    assert got == expected_rows(table.scan(columns=["id", "name", "tstz"], row_filter=where))
    assert [r["id"] for r in got] == [i for i in [*range(10, 20), *range(25, 65)] if i % 7 != 3]
    assert read_table(spark, table, columns=[]).count() == 75


def test_files_are_pruned_on_the_driver_and_read_one_per_partition(
    spark: Any, table: IcebergTable
) -> None:
    all_files = table.scan().plan_files()
    point = table.scan(row_filter="id = 61").plan_files()
    assert 0 < len(point) < len(all_files)

    df = read_table(spark, table, row_filter="id = 61", split_size=1)

    assert df.rdd.getNumPartitions() == len(point)
    assert [r["id"] for r in spark_rows(df)] == [61]


def test_tasks_spread_over_spark_partitions(spark: Any, table: IcebergTable) -> None:
    from pyspark.sql.functions import spark_partition_id

    df = read_table(spark, table)
    assert df.rdd.getNumPartitions() > 1
    per_partition = df.groupBy(spark_partition_id().alias("p")).count().collect()
    assert len([r for r in per_partition if r["count"] > 0]) > 1
    assert sum(r["count"] for r in per_partition) == 75


def test_empty_table_and_empty_result_keep_the_schema(
    spark: Any, catalog: Catalog, table: IcebergTable
) -> None:
    empty = catalog.create_table("db.empty", schema=SCHEMA, partition_spec=[("bucket", "id", 4)])
    assert isinstance(empty, IcebergTable)
    df = read_table(spark, empty)
    assert df.count() == 0
    assert df.schema == read_table(spark, table).schema

    empty.append(rows([row(1)]))
    nothing = read_table(spark, empty, row_filter="id = 2")
    assert nothing.collect() == []
    assert nothing.schema == df.schema


def test_bad_input_raises_on_the_driver(spark: Any, table: IcebergTable) -> None:
    with pytest.raises(NoSuchSnapshotError, match=r"db\.wide has no snapshot 12345"):
        read_table(spark, table, snapshot_id=12345)
    with pytest.raises(ValidationError, match="nope"):
        read_table(spark, table, columns=["id", "nope"])


def test_missing_data_file_fails_the_read_naming_the_file(
    spark: Any, catalog: Catalog, tmp_path: Path
) -> None:
    t = catalog.create_table("db.lost", schema=SCHEMA)
    assert isinstance(t, IcebergTable)
    t.append(rows([row(i) for i in range(3)]))
    (task,) = t.scan().plan_files()
    os.remove(t.io.path_of(task.file_path))

    df = read_table(spark, t)
    with pytest.raises(Exception) as failure:
        df.collect()
    found = find_stream_sink_error(str(failure.value))
    assert isinstance(found, MissingFileError)
    assert task.file_path in str(found) and "db.lost" in str(found)


def _delete_files(table: IcebergTable) -> list[Any]:
    return [d for task in table.scan().plan_files() for d in task.delete_files]
