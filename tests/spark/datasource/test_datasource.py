"""``format("stream_sink")`` (Spark's Python Data Source API, pyspark >= 4.0): append and
upsert streams exactly once across restarts, batch append and overwrite, and the
errors a user meets at the start of the query.

Tests stream_sink.spark.datasource.adapter: the classes Spark calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_rows
from streams import write_batches

import stream_sink as ss
from stream_sink.exceptions import InvalidOptionError, ValidationError
from stream_sink.spark import register
from stream_sink.spark.datasource.register import supports_data_source

pytestmark = pytest.mark.skipif(
    not supports_data_source(), reason="Spark's Python Data Source API needs pyspark >= 4.0"
)

TABLE_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("data", pa.string())])


@pytest.fixture
def warehouse(tmp_path: Path) -> Any:
    catalog = ss.load_catalog("ds", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.events", schema=TABLE_SCHEMA)
    catalog.create_table("db.latest", schema=TABLE_SCHEMA, identifier_fields=["id"])
    return catalog


def stream(
    spark: Any, tmp_path: Path, table: str, schema: str, chk: str = "", **options: str
) -> Any:
    """Start an available-now query over ``tmp_path/<table>-in`` into ``table``."""
    register(spark)
    df = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / f"{table}-in"))
    )
    spread = options.pop("repartition", None)
    if spread:
        df = df.repartition("id") if spread == "id" else df.repartition(int(spread))
    writer = (
        df.writeStream.format("stream_sink")
        .option("catalog.type", "hadoop")
        .option("catalog.warehouse", str(tmp_path / "warehouse"))
        .option("table", f"db.{table}")
        .option("state-dir", str(tmp_path / "state"))
        .option("checkpointLocation", str(tmp_path / (chk or f"chk-{table}")))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer.trigger(availableNow=True).start()


def test_append_stream_exactly_once_across_restart(
    spark: Any, tmp_path: Path, warehouse: Any
) -> None:
    write_batches(
        tmp_path / "events-in",
        [[{"id": f * 10 + i, "data": f"f{f}"} for i in range(10)] for f in range(3)],
    )
    stream(spark, tmp_path, "events", "id long, data string").awaitTermination()
    write_batches(
        tmp_path / "events-in", [[{"id": 30 + i, "data": "f3"} for i in range(10)]], first=3
    )
    stream(spark, tmp_path, "events", "id long, data string").awaitTermination()
    table = warehouse.load_table("db.events")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(40))
    marks = [s.summary["stream-sink.max-committed-checkpoint-id"] for s in table.snapshots()]
    assert marks == ["0", "1", "2", "3"]
    assert len({s.summary["stream-sink.job-id"] for s in table.snapshots()}) == 1
    assert sorted(r["id"] for r in duckdb_rows(table.metadata_location)) == list(range(40))


def test_upsert_stream_needs_the_stream_distributed_by_key(
    spark: Any, tmp_path: Path, warehouse: Any
) -> None:
    batches = [
        [{"id": i % 4, "data": f"v{b}-{i}", "seq": b * 100 + i} for i in range(12)]
        for b in range(2)
    ]
    write_batches(tmp_path / "latest-in", batches)
    schema = "id long, data string, seq long"
    q = stream(spark, tmp_path, "latest", schema, mode="upsert", order_by="seq", repartition="id")
    q.awaitTermination()
    got = warehouse.load_table("db.latest").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["data"]) for r in got) == [(k, f"v1-{8 + k}") for k in range(4)]

    # rows of one key spread over two tasks: refused before anything is committed
    before = len(warehouse.load_table("db.latest").snapshots())
    data = Path(warehouse.load_table("db.latest").location.removeprefix("file:")) / "data"
    files = sorted(data.rglob("*.parquet"))
    q = stream(
        spark,
        tmp_path,
        "latest",
        schema,
        chk="chk-spread",
        mode="upsert",
        order_by="seq",
        repartition="2",
    )
    with pytest.raises(Exception, match=r"call \.repartition\('id'\)"):
        q.awaitTermination()
    assert len(warehouse.load_table("db.latest").snapshots()) == before
    assert sorted(data.rglob("*.parquet")) == files  # the aborted batch's files deleted


def test_batch_append_and_overwrite(spark: Any, tmp_path: Path, warehouse: Any) -> None:
    register(spark)
    df = spark.createDataFrame([(i, f"d{i}") for i in range(6)], "id long, data string")

    def save(mode: str) -> None:
        (
            df.write.format("stream_sink")
            .option("catalog.type", "hadoop")
            .option("catalog.warehouse", str(tmp_path / "warehouse"))
            .option("table", "db.events")
            .option("snapshot-property.app", "batch")
            .mode(mode)
            .save()
        )

    save("append")
    save("append")
    table = warehouse.load_table("db.events")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == sorted(list(range(6)) * 2)
    save("overwrite")
    table = warehouse.load_table("db.events")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(6))
    assert [s.operation for s in table.snapshots()] == ["append", "append", "overwrite"]
    assert table.current_snapshot().summary["app"] == "batch"


def test_bad_options_fail_at_start(spark: Any, tmp_path: Path, warehouse: Any) -> None:
    for name in ("events", "latest"):
        write_batches(tmp_path / f"{name}-in", [[{"id": 1, "data": "a"}]])
    with pytest.raises(Exception, match="unknown option 'oder-by'"):
        stream(
            spark, tmp_path, "events", "id long, data string", **{"oder-by": "seq"}
        ).awaitTermination()
    with pytest.raises(Exception, match=r"needs \.option\('order-by', COLUMN\)"):
        stream(spark, tmp_path, "latest", "id long, data string", mode="upsert").awaitTermination()
    assert not list((tmp_path / "warehouse").rglob("*.parquet"))
    for options, error in (
        ({"oder-by": "x"}, "unknown option"),
        ({"distribution": "hash"}, "repartition"),
        ({"checkpoint-interval-batches": "3"}, "only 1"),
    ):
        from stream_sink.spark.datasource.options import parse_source_options

        with pytest.raises(InvalidOptionError, match=error):
            parse_source_options(
                {"table": "db.t", "checkpointLocation": "c", **options}, streaming=True
            )
    assert issubclass(InvalidOptionError, ValidationError)


def test_in_sink_maintenance_compacts_and_expires_an_iceberg_stream(
    spark: Any, tmp_path: Path, warehouse: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``maintenance.*`` options: compaction and expiry run in the route's commit after
    every 2 commits, as ``IcebergSink(maintenance=...)`` runs them; the triggers' counts
    and the metrics are kept in ``maintenance.json`` across the commits' workers and
    shown by ``stream-sink status``; the table, read by DuckDB and pyiceberg, holds every
    row once."""
    from readers import pyiceberg_rows

    from stream_sink.cli.main import main

    warehouse.create_table("db.small", schema=TABLE_SCHEMA)
    write_batches(
        tmp_path / "small-in",
        [[{"id": b * 10 + i, "data": f"b{b}"} for i in range(10)] for b in range(6)],
    )
    stream(
        spark,
        tmp_path,
        "small",
        "id long, data string",
        repartition="2",  # two small files a batch
        **{
            "maintenance.commit-count": "2",
            "maintenance.min-input-files": "2",
            "maintenance.max-snapshot-age-ms": "0",
            "maintenance.retain-last": "2",
        },
    ).awaitTermination()

    table = warehouse.load_table("db.small")
    assert int(table.current_snapshot().summary["total-data-files"]) <= 2  # of 12 written
    assert len(table.snapshots()) == 2  # expired down to retain-last
    assert [s.operation for s in table.snapshots()][-1] == "replace"
    want = list(range(60))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == want
    for rows in (duckdb_rows(table.metadata_location), pyiceberg_rows(table.metadata_location)):
        assert sorted(r["id"] for r in rows) == want

    report = json.loads((tmp_path / "chk-small" / "db.small" / "maintenance.json").read_text())
    assert report["runs"] == 3 and report["failures"] == 0, report["last_error"]
    assert report["rewritten_data_files"] >= 6 and report["expired_snapshots"] >= 4
    assert report["trigger"]["commits"] == 0  # the last commit's run reset the count
    chk = str(tmp_path / "chk-small")
    wh = str(tmp_path / "warehouse")
    assert (
        main(["status", "--checkpoint-location", chk, "--warehouse", wh, "--format", "jsonl"]) == 0
    )
    status = json.loads(capsys.readouterr().out)
    assert status["watermark"] == 5 and status["acknowledged"] == [0, 1, 2, 3, 4, 5]
    assert status["maintenance"]["runs"] == 3 and not status["maintenance"]["failing"]
