"""The cluster configuration's storage path on a real S3 server (SeaweedFS): warehouse
and sink checkpoints on ``s3://``, a SQL catalog (SQLite here, PostgreSQL in
docker-compose), data files written by Spark executors straight to S3.

Spark's own checkpointLocation stays local here: the session-wide Spark has no ``s3a://``
filesystem (hadoop-aws); ``tests/spark/foreach_batch/test_iceberg_rest_kill.py`` runs its
drivers with ``local_session(s3a=...)`` and Spark's checkpoints on ``s3a://``.

The Delta test writes a Delta table on ``s3://`` with DeltaSink (upsert: executors read
the touched files from S3 and write their rewrites there; each version is a conditional
PUT), read back by delta-rs and DuckDB over S3.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from delta_readers import delta_rs_rows, duckdb_delta_rows
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.delta import DeltaTable
from stream_sink.io import FileIO
from stream_sink.spark import DeltaSink, IcebergSink, register
from stream_sink.spark.datasource.register import supports_data_source


def test_append_stream_on_s3_with_sql_catalog_survives_restart_and_lost_state(
    spark: Any, tmp_path: Path, s3_props: dict[str, str]
) -> None:
    catalog = ss.load_catalog(
        "s3",
        type="sql",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse="s3://lake/warehouse",
        **s3_props,
    )
    catalog.create_namespace("db")
    catalog.create_table(
        "db.t",
        schema=pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())]),
        partition_spec=[("identity", "data")],
    )
    source = tmp_path / "in"
    write_batches(
        source,
        [[{"id": i, "data": f"d{i % 2}"} for i in range(b * 10, b * 10 + 10)] for b in range(2)],
    )

    def run() -> None:
        sink = IcebergSink(
            catalog=catalog,
            table="db.t",
            checkpoint_location="s3://lake/chk",
            spark_checkpoint_location=str(tmp_path / "spark-chk"),
            state_dir=str(tmp_path / "state"),
        )
        try:
            run_available(
                spark,
                source,
                "id long, data string",
                sink.foreach_batch,
                sink.spark_checkpoint_location,
            )
        finally:
            sink.close()

    run()
    table = catalog.load_table("db.t")
    assert table.location.startswith("s3://lake/warehouse/")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(20))
    io = FileIO.for_location("s3://lake", s3_props)
    assert io.list_dir("s3://lake/chk/db.t")[-1] == "s3://lake/chk/db.t/chk-1"

    # restart after losing the local state: it is restored from the checkpoint on S3
    shutil.rmtree(tmp_path / "state")
    write_batches(source, [[{"id": i, "data": "d9"} for i in range(20, 25)]], first=2)
    run()
    table = catalog.load_table("db.t")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(25))
    assert len(table.snapshots()) == 3
    assert io.list_dir("s3://lake/warehouse/db/t/data")  # executors wrote data files to S3


def test_delta_upsert_stream_on_s3_survives_restart(
    spark: Any, tmp_path: Path, s3_props: dict[str, str]
) -> None:
    source = tmp_path / "delta-in"
    write_batches(
        source,
        [
            [{"id": i, "v": f"a{i}", "seq": i} for i in range(6)],
            [{"id": 1, "v": "b1", "seq": 10}, {"id": 7, "v": "b7", "seq": 11}],
        ],
    )

    def run() -> None:
        sink = DeltaSink(
            path="s3://lake/delta-sink/t",
            mode="upsert",
            equality_fields=["id"],
            order_by="seq",
            checkpoint_location=str(tmp_path / "delta-chk"),
            state_dir=str(tmp_path / "delta-state"),
            storage_options=s3_props,
        )
        try:
            schema = "id long, v string, seq long"
            run_available(spark, source, schema, sink.foreach_batch, sink.spark_checkpoint_location)
        finally:
            sink.close()

    run()
    write_batches(source, [[{"id": 2, "v": "c2", "seq": 20}]], first=2)
    run()
    want = sorted([(0, "a0"), (1, "b1"), (2, "c2"), (3, "a3"), (4, "a4"), (5, "a5"), (7, "b7")])
    table = DeltaTable.load("s3://lake/delta-sink/t", storage_options=s3_props)
    assert table.version == 3  # create + one version per batch, none twice
    for rows in (
        table.to_arrow().to_pylist(),
        delta_rs_rows(table.location, s3=s3_props),
        duckdb_delta_rows(table.location, s3=s3_props),
    ):
        assert sorted((r["id"], r["v"]) for r in rows) == want


@pytest.mark.skipif(not supports_data_source(), reason="format('stream_sink') needs pyspark 4")
def test_delta_data_source_route_upserts_a_table_on_s3(
    spark: Any, tmp_path: Path, s3_props: dict[str, str]
) -> None:
    """``format("stream_sink")`` with target ``delta`` and ``s3.*`` options: the table is
    created on S3, each batch committed by a conditional PUT."""
    source = tmp_path / "route-in"
    write_batches(
        source,
        [
            [{"id": i, "v": f"a{i}", "seq": i} for i in range(4)],
            [{"id": 1, "v": "b1", "seq": 10}, {"id": 5, "v": "b5", "seq": 11}],
        ],
    )
    register(spark)
    df = spark.readStream.schema("id long, v string, seq long").option("maxFilesPerTrigger", 1)
    writer = (
        df.json(str(source))
        .repartition("id")
        .writeStream.format("stream_sink")
        .option("target", "delta")
        .option("mode", "upsert")
        .option("equality-fields", "id")
        .option("order-by", "seq")
        .option("state-dir", str(tmp_path / "route-state"))
        .option("checkpointLocation", str(tmp_path / "route-chk"))
    )
    for key, value in s3_props.items():
        writer = writer.option(key, value)
    writer.trigger(availableNow=True).start("s3://lake/route/t").awaitTermination()
    want = sorted([(0, "a0"), (1, "b1"), (2, "a2"), (3, "a3"), (5, "b5")])
    table = DeltaTable.load("s3://lake/route/t", storage_options=s3_props)
    assert table.version == 2  # create + one version per batch
    for rows in (
        delta_rs_rows(table.location, s3=s3_props),
        duckdb_delta_rows(table.location, s3=s3_props),
    ):
        assert sorted((r["id"], r["v"]) for r in rows) == want
