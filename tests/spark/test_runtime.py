"""stream_sink.spark.runtime: every front door hands Spark's offset log to its tables'
committers, so each commit records the end offsets and event-time watermark of the
batches it commits (read back with stream_sink.ops.source_positions) — IcebergSink and
DeltaSink with foreachBatch, a routed IcebergSink, and format("stream_sink") into
Iceberg and Delta. Apache Iceberg Java reads the same watermarks from the summaries, and
the completeness answer worked out from them is ``complete_up_to``'s at every time."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from streams import write_batches

import stream_sink as ss
from stream_sink.cli.status import render
from stream_sink.commit.iceberg.source_position import sink_position
from stream_sink.commit.source_position import EVENT_TIME_WATERMARK_MS, SOURCE_OFFSETS
from stream_sink.delta import DeltaTable
from stream_sink.ops.source_positions import complete_up_to
from stream_sink.ops.source_positions import sink_position as table_position
from stream_sink.ops.status import sink_status
from stream_sink.spark import DeltaSink, IcebergSink, register
from stream_sink.spark.datasource.register import supports_data_source

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("ts", pa.timestamp("us", tz="UTC"))]
)
BASE_S = 1_700_000_000


def _files(source: Path, files: int = 3) -> None:
    """File i holds ids 10i..10i+4 at event times ``BASE_S + 100 i`` seconds."""
    write_batches(
        source,
        [[{"id": 10 * f + i, "ts": BASE_S + 100 * f} for i in range(5)] for f in range(files)],
    )


def _logged(checkpoint: Path, batch_id: int) -> tuple[str, int | None]:
    """What Spark's offset log says of ``batch_id``: the sources' offsets (as the sink
    records them) and the watermark (None: 0)."""
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    mark = json.loads(lines[1])["batchWatermarkMs"]
    offsets = json.dumps([json.loads(x) for x in lines[2:]], separators=(",", ":"))
    return offsets, mark or None


def _run(spark: Any, source: Path, foreach: Any, checkpoint: str) -> None:
    df = (
        spark.readStream.schema("id long, ts long")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .selectExpr("id", "timestamp_seconds(ts) AS ts")
        .withWatermark("ts", "10 seconds")
    )
    query = (
        df.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def test_iceberg_sink_records_each_batchs_offsets_and_watermark(spark: Any, tmp_path: Path) -> None:
    catalog = ss.load_catalog("t", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=SCHEMA)
    _files(tmp_path / "in")
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        sink_id="s",
        checkpoint_location=str(tmp_path / "ck"),
        state_dir=str(tmp_path / "state"),
    )
    try:
        _run(spark, tmp_path / "in", sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()
    table = catalog.load_table("db.t")
    spark_ck = Path(sink.spark_checkpoint_location)
    snapshots = table.snapshots()
    assert len(snapshots) == 3
    for snap in snapshots:
        batch = int(snap.summary["stream-sink.max-committed-checkpoint-id"])
        offsets, mark = _logged(spark_ck, batch)
        assert snap.summary[SOURCE_OFFSETS] == offsets == f'[{{"logOffset":{batch}}}]'
        assert snap.summary.get(EVENT_TIME_WATERMARK_MS) == (None if mark is None else str(mark))
    last = (BASE_S + 100) * 1000 - 10_000  # batch 2: the newest event of batch 1, less 10 s
    position = table_position(table, "s")
    assert position is not None and position.batch_id == 2
    assert position.event_time_watermark_ms == last
    assert position.starting_offsets() == '{"logOffset":2}'
    complete = complete_up_to(table, "s", last)
    assert complete is not None and complete.version == snapshots[-1].snapshot_id
    assert complete_up_to(table, "s", last + 1) is None
    status = sink_status(str(tmp_path / "ck"), None)
    assert status.position == position
    shown = r'^source position +batch 2 of query .*: \[\{"logOffset":2\}\], event-time'
    assert re.search(shown, render(status), re.M)
    _java_answers_completeness_as_we_do(table, str(tmp_path / "warehouse"))


def _java_answers_completeness_as_we_do(table: Any, warehouse: str) -> None:
    """Apache Iceberg Java reads the watermarks from the snapshot summaries; the oldest
    snapshot complete up to each time, worked out from what Java read, is the one
    ``complete_up_to`` names."""
    from interop.conftest import java_available, sql_with_java

    if not java_available():
        pytest.skip("Java (the peer harness) is needed to read the summaries with Iceberg Java")
    (snaps,) = sql_with_java(
        warehouse,
        [
            "SELECT snapshot_id, parent_id, "
            f"summary['{EVENT_TIME_WATERMARK_MS}'] AS mark FROM hc.db.t.snapshots"
        ],
    )
    assert snaps is not None
    marks = {r["snapshot_id"]: r for r in snaps.to_pylist()}
    assert {k: r["mark"] for k, r in marks.items()} == {
        s.snapshot_id: s.summary.get(EVENT_TIME_WATERMARK_MS) for s in table.snapshots()
    }
    times = {int(r["mark"]) + d for r in marks.values() if r["mark"] for d in (-1, 0, 1)}
    for t in sorted(times):
        oldest, at = None, table.current_snapshot().snapshot_id
        while at is not None and marks[at]["mark"] is not None and int(marks[at]["mark"]) >= t:
            oldest, at = at, marks[at]["parent_id"]
        ours = complete_up_to(table, "s", t)
        assert (ours.version if ours else None) == oldest, t


def test_a_routed_sink_records_the_same_offsets_in_every_table(spark: Any, tmp_path: Path) -> None:
    catalog = ss.load_catalog("t", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    for name in ("a", "b"):
        catalog.create_table(f"db.{name}", schema=SCHEMA)
    write_batches(
        tmp_path / "in",
        [[{"id": i, "ts": BASE_S, "t": f"db.{'ab'[i % 2]}"} for i in range(4)]],
    )
    sink = IcebergSink(
        catalog=catalog,
        table_column="t",
        tables=["db.a", "db.b"],
        sink_id="r",
        checkpoint_location=str(tmp_path / "ck"),
        state_dir=str(tmp_path / "state"),
    )
    df = spark.readStream.schema("id long, ts long, t string").json(str(tmp_path / "in"))
    df = df.selectExpr("id", "timestamp_seconds(ts) AS ts", "t")
    try:
        query = (
            df.writeStream.foreachBatch(sink.foreach_batch)
            .option("checkpointLocation", sink.spark_checkpoint_location)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    finally:
        sink.close()
    positions = [
        sink_position(catalog.load_table(f"db.{n}").metadata, f"r=db.{n}") for n in ("a", "b")
    ]
    assert [(p.batch_id, p.sources) for p in positions if p is not None] == [
        (0, ({"logOffset": 0},)),
        (0, ({"logOffset": 0},)),
    ]


def test_delta_sink_records_the_offsets_in_commit_info(spark: Any, tmp_path: Path) -> None:
    _files(tmp_path / "in", files=2)
    sink = DeltaSink(
        path=str(tmp_path / "lake"),
        sink_id="d",
        checkpoint_location=str(tmp_path / "ck"),
        state_dir=str(tmp_path / "state"),
    )
    try:
        _run(spark, tmp_path / "in", sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()
    table = DeltaTable.load(str(tmp_path / "lake"))
    position = table_position(table, "d")
    assert position is not None and position.version == table.version
    offsets, mark = _logged(Path(sink.spark_checkpoint_location), position.batch_id)
    assert (position.offsets_json, position.event_time_watermark_ms) == (offsets, mark)
    assert position.sources == ({"logOffset": 1},)
    assert sink_status(str(tmp_path / "ck"), None).position == position


@pytest.mark.skipif(not supports_data_source(), reason="needs pyspark >= 4.0")
def test_the_data_source_route_records_the_offsets(spark: Any, tmp_path: Path) -> None:
    catalog = ss.load_catalog("ds", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=SCHEMA)
    _files(tmp_path / "in", files=2)
    register(spark)
    df = (
        spark.readStream.schema("id long, ts long")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
        .selectExpr("id", "timestamp_seconds(ts) AS ts")
        .withWatermark("ts", "10 seconds")
    )
    query = (
        df.writeStream.format("stream_sink")
        .option("catalog.type", "hadoop")
        .option("catalog.warehouse", str(tmp_path / "warehouse"))
        .option("table", "db.t")
        .option("sink-id", "ds")
        .option("state-dir", str(tmp_path / "state"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    table = catalog.load_table("db.t")
    position = table_position(table, "ds")
    assert position is not None and position.batch_id == 1
    offsets, mark = _logged(tmp_path / "chk", 1)
    assert (position.offsets_json, position.event_time_watermark_ms) == (offsets, mark)
    assert mark == BASE_S * 1000 - 10_000
    assert table.snapshots()[-1].summary[SOURCE_OFFSETS] == '[{"logOffset":1}]'


@pytest.mark.skipif(not supports_data_source(), reason="needs pyspark >= 4.0")
def test_the_data_source_route_records_the_offsets_in_a_delta_commit(
    spark: Any, tmp_path: Path
) -> None:
    _files(tmp_path / "in", files=2)
    register(spark)
    query = (
        spark.readStream.schema("id long, ts long")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
        .writeStream.format("stream_sink")
        .option("target", "delta")
        .option("sink-id", "dd")
        .option("state-dir", str(tmp_path / "state"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start(str(tmp_path / "lake"))
    )
    query.awaitTermination()
    table = DeltaTable.load(str(tmp_path / "lake"))
    position = table_position(table, "dd")
    assert position is not None and position.batch_id == 1 and position.version == table.version
    assert position.offsets_json == _logged(tmp_path / "chk", 1)[0] == '[{"logOffset":1}]'
    assert position.event_time_watermark_ms is None  # the query has no event-time watermark
