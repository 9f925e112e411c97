"""The cluster configuration's storage path on an S3-compatible server (moto): warehouse
and sink checkpoints on ``s3://``, a SQL catalog (SQLite here, PostgreSQL in
docker-compose), data files written by Spark executors straight to S3.

Spark's own checkpointLocation stays local here: writing it to ``s3a://`` needs the
hadoop-aws jars, which the docker image adds and this machine lacks.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.io import FileIO
from stream_sink.spark import IcebergSink


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
