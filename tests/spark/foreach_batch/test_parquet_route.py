"""Which route writes a batch's data files (``write_route``), decided before any Spark
job: Spark's own Parquet writer only where it writes exactly the files Iceberg expects.

Tests stream_sink.spark.foreach_batch.file_columns: what Spark's writer cannot write as
Iceberg does.
Tests stream_sink.spark.private_session: the Spark route's settings kept off the user's
session.
Tests stream_sink.write.written_file: data files described from the footers Spark wrote."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.exceptions import InvalidOptionError
from stream_sink.io import FileIO
from stream_sink.spark import IcebergSink
from stream_sink.spark.foreach_batch.parquet_route import choose_route, rows_per_file
from stream_sink.write.writer_factory import TaskWriterFactory

PLAIN = pa.schema([pa.field("id", pa.int64(), False), ("s", pa.string()), ("x", pa.float64())])


def factory(tmp_path: Path, schema: pa.Schema = PLAIN, **kwargs: Any) -> TaskWriterFactory:
    catalog = ss.load_catalog("r", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    return TaskWriterFactory.for_table(catalog.create_table("db.t", schema=schema, **kwargs))


def test_auto_takes_spark_for_append_and_overwrite_only(tmp_path: Path) -> None:
    f = factory(tmp_path, partition_spec=[("bucket", "id", 4), ("truncate", "s", 2)])
    assert choose_route("auto", "append", f)[0] == "spark"
    assert choose_route("auto", "overwrite", f)[0] == "spark"
    assert choose_route("auto", "upsert", f)[0] == "arrow"
    assert choose_route("arrow", "append", f)[0] == "arrow"


@pytest.mark.parametrize(
    ("schema", "spec", "why"),
    [
        (pa.schema([("id", pa.int64()), ("li", pa.list_(pa.int64()))]), None, "'li'"),
        (pa.schema([("id", pa.int64()), ("b", pa.binary(16))]), None, "'b'"),
        (pa.schema([("id", pa.int64()), ("t", pa.time64("us"))]), None, "'t'"),
        (pa.schema([("id", pa.int64()), ("x", pa.float64())]), [("identity", "x")], "x"),
        (pa.schema([("ts", pa.timestamp("us"))]), [("day", "ts")], "ts"),
    ],
)
def test_what_spark_cannot_write_exactly_takes_pyarrow_even_when_asked(
    tmp_path: Path, schema: pa.Schema, spec: Any, why: str
) -> None:
    route, reason = choose_route("spark", "append", factory(tmp_path, schema, partition_spec=spec))
    assert route == "arrow" and why in reason


def test_auto_keeps_pyarrow_off_local_paths_and_for_other_codecs(tmp_path: Path) -> None:
    remote = dataclasses.replace(factory(tmp_path), data_location="s3://bucket/t/data")
    assert choose_route("auto", "append", remote)[0] == "arrow"
    assert choose_route("spark", "append", remote)[0] == "spark"
    f = factory(tmp_path / "b", properties={"write.parquet.compression-codec": "brotli"})
    assert choose_route("spark", "append", f) == ("arrow", "codec brotli")


def test_a_table_with_vended_credentials_takes_pyarrow_even_when_spark_is_asked(
    tmp_path: Path,
) -> None:
    """s3a would write with the session's own keys, not the catalog's vended ones."""
    vended = {
        "s3.access-key-id": "ASIAEXAMPLE",
        "s3.secret-access-key": "temporary",
        "s3.session-token": "session",
        "s3.session-token-expires-at-ms": "4102444800000",
    }
    remote = dataclasses.replace(
        factory(tmp_path),
        data_location="s3://bucket/t/data",
        io=FileIO.for_location("s3://bucket/t", vended),
    )
    route, reason = choose_route("spark", "append", remote)
    assert route == "arrow" and "vends this table's storage credentials" in reason


def test_an_unknown_route_is_refused(tmp_path: Path) -> None:
    catalog = ss.load_catalog("r", type="hadoop", warehouse=str(tmp_path / "wh"))
    with pytest.raises(InvalidOptionError, match="write_route='fast'"):
        IcebergSink(catalog=catalog, table="db.t", write_route="fast")


def test_rows_per_file_come_from_the_tables_bytes_per_record() -> None:
    summary = {"total-records": "1000", "total-files-size": "50000"}  # 50 B per record
    assert rows_per_file(summary, 10_000) == 200
    assert rows_per_file(summary, 10) == 1  # never zero: Spark reads 0 as "no limit"
    assert rows_per_file({"total-records": "0", "total-files-size": "0"}, 10_000) is None
    assert rows_per_file({}, 10_000) is None
    assert rows_per_file({"total-records": "x", "total-files-size": "1"}, 10_000) is None


def _hold_until(gate: Path) -> Any:
    """A UDF (identity on timestamps) whose task says it started, then waits for ``go``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    def held(ts: Any) -> Any:
        import time as t

        (gate / "started").touch()
        deadline = t.monotonic() + 120
        while not (gate / "go").exists() and t.monotonic() < deadline:
            t.sleep(0.05)
        return ts

    return F.udf(held, TimestampType())


def test_the_spark_route_never_changes_its_sessions_settings(spark: Any, tmp_path: Path) -> None:
    """Two writes in one session at once: the Spark route writes its timestamptz column as
    INT64 microseconds with field ids while, in the middle of its write, another query of
    the same session writes timestamps with the session's own setting (INT96)."""
    import threading

    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from stream_sink.spark.foreach_batch.parquet_route import write_batch

    key = "spark.sql.parquet.outputTimestampType"
    assert spark.conf.get(key) == "INT96"  # Spark's default, which the other query keeps
    schema = pa.schema([pa.field("id", pa.int64(), False), ("ts", pa.timestamp("us", "UTC"))])
    f = factory(tmp_path, schema)
    gate = tmp_path / "gate"
    gate.mkdir()
    ts = _hold_until(gate)(F.timestamp_seconds(F.col("id")))
    batch = spark.range(3).coalesce(1).select("id", ts.alias("ts"))
    written: list[Any] = []
    route = threading.Thread(target=lambda: written.append(write_batch(batch, f, "db.t")))
    route.start()
    try:
        for _ in range(2400):  # the route's task is running (its settings in force)
            if (gate / "started").exists() or not route.is_alive():
                break
            threading.Event().wait(0.05)
        assert (gate / "started").exists()
        assert spark.conf.get(key) == "INT96"
        spark.range(1).select(F.timestamp_seconds("id").alias("ts")).write.parquet(
            str(tmp_path / "other")
        )
    finally:
        (gate / "go").touch()
        route.join()
    other = next((tmp_path / "other").glob("*.parquet"))
    assert pq.ParquetFile(other).schema.column(0).physical_type == "INT96"
    (result,) = written
    (data_file,) = result.data_files
    ours = pq.ParquetFile(data_file.file_path.removeprefix("file:"))
    assert ours.schema.column(1).physical_type == "INT64"
    assert ours.schema_arrow.field("ts").metadata[b"PARQUET:field_id"] == b"2"
    assert spark.conf.get(key) == "INT96"
