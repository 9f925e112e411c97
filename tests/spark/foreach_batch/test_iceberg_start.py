"""``IcebergSink.start``: configuration mistakes raise before the query starts, and the
executor pre-flight says in one sentence how to fix a worker without stream_sink.

Tests stream_sink.spark.preflight: the executors' pre-flight."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from streams import write_batches

import stream_sink as ss
from stream_sink.exceptions import InvalidOptionError, MissingColumnError, SchemaMismatchError
from stream_sink.spark import IcebergSink

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("day", pa.date32()), ("data", pa.string())]
)


def sink(tmp_path: Path, **kwargs: Any) -> IcebergSink:
    catalog = ss.load_catalog("start", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    if not catalog.list_namespaces():
        catalog.create_namespace("db")
        catalog.create_table("db.t", schema=SCHEMA, identifier_fields=["id"])
        catalog.create_table(
            "db.p", schema=SCHEMA, identifier_fields=["id"], partition_spec=[("identity", "day")]
        )
    kwargs.setdefault("table", "db.t")
    return IcebergSink(
        catalog=catalog,
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
        **kwargs,
    )


def test_mistakes_raise_before_the_query_starts(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "in", [[{"id": 1, "day": "2024-01-01", "data": "a", "lsn": 1}]])

    def df(schema: str) -> Any:
        return spark.readStream.schema(schema).json(str(tmp_path / "in"))

    active = len(spark.streams.active)
    cases = [
        (sink(tmp_path), "id string, day date, data string", SchemaMismatchError, "id"),
        (
            sink(tmp_path, mode="upsert", order_by="lsn"),
            "id long, day date, data string",
            MissingColumnError,
            "order column 'lsn'",
        ),
        (
            sink(tmp_path, mode="upsert", order_by="lsn", equality_fields=["nope"]),
            "id long, day date, data string, lsn long",
            MissingColumnError,
            "'nope'",
        ),
        (
            sink(tmp_path, table="db.p", mode="upsert", order_by="lsn"),
            "id long, day date, data string, lsn long",
            InvalidOptionError,
            "partitioned by",
        ),
    ]
    for s, schema, error, text in cases:
        with pytest.raises(error, match=text):
            s.start(df(schema), check_executors=False)
    assert len(spark.streams.active) == active  # nothing was started
    assert not (tmp_path / "chk").exists()


def test_start_runs_the_query_with_the_sink_checkpoint(spark: Any, tmp_path: Path) -> None:
    write_batches(
        tmp_path / "in", [[{"id": i, "day": "2024-01-01", "data": "a", "lsn": i}] for i in range(3)]
    )
    s = sink(tmp_path, mode="upsert", order_by="lsn")
    df = (
        spark.readStream.schema("id long, day date, data string, lsn long")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
    )
    query = s.start(df, trigger={"availableNow": True}, query_name="start_test")
    try:
        query.awaitTermination()
        assert query.name == "start_test"
    finally:
        s.close()
    assert (Path(s.spark_checkpoint_location) / "commits" / "2").exists()
    table = s.catalog.load_table("db.t")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2]


PROBE = """
from stream_sink.spark import check_executors, local_session
check_executors(local_session("preflight"))
"""


@pytest.mark.spark
def test_preflight_names_the_fix_when_workers_lack_stream_sink(tmp_path: Path) -> None:
    bare = shutil.which("python3", path="/usr/bin:/bin")
    if bare is None or os.path.realpath(bare) == os.path.realpath(sys.executable):
        pytest.skip("no second Python interpreter without stream_sink")
    env = dict(os.environ, PYSPARK_PYTHON=bare)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "stream_sink.exceptions.ExecutorEnvironmentError: Spark's executors "
        "cannot import stream_sink"
    )
    assert "PYSPARK_PYTHON" in last and "--py-files" in last
