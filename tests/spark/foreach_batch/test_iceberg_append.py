"""Append streams through IcebergSink on local Spark: one snapshot per micro-batch,
every row exactly once across restarts, bad input stops the query before a commit.

Tests stream_sink.spark.foreach_batch.iceberg: IcebergSink appending and overwriting.
Tests stream_sink.spark.plan: a batch refused before anything is written, and shaped.
Tests stream_sink.spark.schema_check: a DataFrame that does not fit the table refused by
column.
Tests stream_sink.spark.cdc.distribution: hash distribution of a partitioned table's rows.
Tests stream_sink.spark.tasks.iceberg: the executors' WriteTask.
Tests stream_sink.spark.tasks.shared: each task's one result row.
Tests stream_sink.spark.foreach_batch.destination: the sink's one destination.
Tests stream_sink.spark.foreach_batch.one_table: the single-table destination."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_rows
from streams import run_available, run_sink, write_batches

import stream_sink as ss
from stream_sink.spark import IcebergSink
from stream_sink.table.catalog import Catalog

SCHEMA = "id long, data string"
TABLE_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("data", pa.string())])


def rows(first: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "data": f"d{i % 3}"} for i in range(first, first + n)]


def new_table(tmp_path: Path, partition_spec: list | None = None) -> Catalog:
    catalog = ss.load_catalog("test", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=TABLE_SCHEMA, partition_spec=partition_spec)
    return catalog


def sink_for(catalog: Catalog, tmp_path: Path, **kwargs: Any) -> IcebergSink:
    return IcebergSink(
        catalog=catalog,
        table="db.t",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
        **kwargs,
    )


def run(spark: Any, tmp_path: Path, sink: IcebergSink) -> None:
    run_sink(spark, tmp_path / "in", SCHEMA, sink)


def table_ids(catalog: Catalog) -> list[int]:
    return sorted(catalog.load_table("db.t").scan().to_arrow().column("id").to_pylist())


def test_append_unpartitioned_one_snapshot_per_batch_and_restart(
    spark: Any, tmp_path: Path
) -> None:
    catalog = new_table(tmp_path)
    write_batches(tmp_path / "in", [rows(0, 5), rows(5, 5), rows(10, 5)])
    run(spark, tmp_path, sink_for(catalog, tmp_path))
    table = catalog.load_table("db.t")
    marks = [s.summary["stream-sink.max-committed-checkpoint-id"] for s in table.snapshots()]
    assert marks == ["0", "1", "2"]
    assert table_ids(catalog) == list(range(15))

    # restart from the same checkpoint location with a new sink object: continues
    write_batches(tmp_path / "in", [rows(15, 5), rows(20, 5)], first=3)
    run(spark, tmp_path, sink_for(catalog, tmp_path))
    table = catalog.load_table("db.t")
    assert len(table.snapshots()) == 5
    assert table_ids(catalog) == list(range(25))
    assert sorted(r["id"] for r in duckdb_rows(table.metadata_location)) == list(range(25))
    job_ids = {s.summary["stream-sink.job-id"] for s in table.snapshots()}
    assert len(job_ids) == 1  # the same Spark query id across the restart

    # nothing new: nothing committed
    run(spark, tmp_path, sink_for(catalog, tmp_path))
    assert len(catalog.load_table("db.t").snapshots()) == 5


def test_append_partitioned_with_hash_distribution(spark: Any, tmp_path: Path) -> None:
    catalog = new_table(tmp_path, [("identity", "data"), ("bucket", "id", 4)])
    write_batches(tmp_path / "in", [rows(0, 30), rows(30, 30)])
    run(spark, tmp_path, sink_for(catalog, tmp_path, distribution="hash"))
    table = catalog.load_table("db.t")
    assert table_ids(catalog) == list(range(60))
    got = sorted((r["id"], r["data"]) for r in duckdb_rows(table.metadata_location))
    assert got == [(i, f"d{i % 3}") for i in range(60)]
    added = [int(s.summary["added-data-files"]) for s in table.snapshots()]
    assert all(n <= 12 for n in added)  # at most 3 data values x 4 buckets per batch


def test_bad_rows_stop_the_query_before_commit_and_a_fixed_restart_is_exact(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    catalog = new_table(tmp_path)
    bad = rows(5, 5)
    bad[2]["id"] = None  # null in a required column
    write_batches(tmp_path / "in", [rows(0, 5), bad])
    with pytest.raises(StreamingQueryException, match=r"SchemaMismatchError.*'id'.*null"):
        run(spark, tmp_path, sink_for(catalog, tmp_path))
    assert table_ids(catalog) == list(range(5))
    data_dir = tmp_path / "warehouse" / "db" / "t" / "data"
    assert len(list(data_dir.rglob("*.parquet"))) == 1  # the failed batch left no file

    write_batches(tmp_path / "in", [rows(5, 5)], first=1)  # fix the input, restart
    run(spark, tmp_path, sink_for(catalog, tmp_path))
    assert table_ids(catalog) == list(range(10))


def test_a_dataframe_that_does_not_fit_the_table_is_refused_naming_columns(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    catalog = new_table(tmp_path)
    write_batches(tmp_path / "in", [[{"id": "x", "data": "a", "extra": 1}]])
    sink = sink_for(catalog, tmp_path)
    with pytest.raises(StreamingQueryException) as info:
        try:
            run_available(
                spark,
                tmp_path / "in",
                "id string, data string, extra int",
                sink.foreach_batch,
                sink.spark_checkpoint_location,
            )
        finally:
            sink.close()
    message = str(info.value)
    assert "SchemaMismatchError" in message and "'extra'" in message and "'id'" in message
    assert catalog.load_table("db.t").snapshots() == []


@pytest.mark.parametrize("route", ["spark", "arrow"])
def test_overwrite_replaces_the_partitions_each_batch_writes(
    spark: Any, tmp_path: Path, route: str
) -> None:
    catalog = new_table(tmp_path, [("identity", "data")])
    first = rows(0, 6)  # d0, d1, d2
    second = [{"id": 100 + i, "data": "d1"} for i in range(2)]
    write_batches(tmp_path / "in", [first, second])
    run(spark, tmp_path, sink_for(catalog, tmp_path, mode="overwrite", write_route=route))
    table = catalog.load_table("db.t")
    assert [s.summary["operation"] for s in table.snapshots()] == ["overwrite", "overwrite"]
    kept = [r["id"] for r in first if r["data"] != "d1"]
    assert table_ids(catalog) == sorted([*kept, 100, 101])
    assert sorted(r["id"] for r in duckdb_rows(table.metadata_location)) == table_ids(catalog)
    names = [t.file_path.rsplit("/", 1)[-1] for t in table.scan().plan_files()]
    assert all(n.startswith("part-") == (route == "spark") for n in names)


def test_spark_route_files_are_cut_near_the_target_file_size(spark: Any, tmp_path: Path) -> None:
    """Spark's writer cuts files by rows only: after the first batch the sink knows the
    table's bytes per record and asks for files of about ``write.target-file-size-bytes``."""
    catalog = ss.load_catalog("test", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    target = 40_000
    props = {"write.target-file-size-bytes": str(target)}
    catalog.create_table("db.t", schema=TABLE_SCHEMA, properties=props)
    big = [
        [{"id": i, "data": f"row {i:08d} {i * 7919 % 100_003}"} for i in range(n, n + 20_000)]
        for n in (0, 20_000)
    ]
    write_batches(tmp_path / "in", big)
    run(spark, tmp_path, sink_for(catalog, tmp_path, write_route="spark"))
    table = catalog.load_table("db.t")
    first = table.snapshots()[0].snapshot_id
    first_files = table.scan(snapshot_id=first).plan_files()
    second_added = [
        f
        for f in table.scan().plan_files()
        if f.file_path not in {g.file_path for g in first_files}
    ]
    assert len(first_files) == 1  # no estimate before the table has rows
    assert len(second_added) >= 3
    sizes = [f.data_file.file_size_in_bytes for f in second_added]
    assert max(sizes) <= 1.5 * target, sizes
    assert table_ids(catalog) == list(range(40_000))
    assert sorted(r["id"] for r in duckdb_rows(table.metadata_location)) == list(range(40_000))
