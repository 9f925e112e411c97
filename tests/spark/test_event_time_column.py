"""stream_sink.spark.runtime with ``event_time_column``: IcebergSink and DeltaSink behind
foreachBatch record, in each commit, the low and high event time of the files it adds
(from their column statistics), read back by ``sink_position`` and shown by
``stream-sink status --table``; a column the table lacks stops the query before any
commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from test_runtime import BASE_S, SCHEMA, _files, _run

import stream_sink as ss
from stream_sink.cli.main import main
from stream_sink.commit.source_position import EVENT_TIME_HIGH_MS, EVENT_TIME_LOW_MS
from stream_sink.delta import DeltaTable
from stream_sink.ops.source_positions import sink_position
from stream_sink.spark import DeltaSink, IcebergSink


def _ms(f: int) -> int:
    """The event time of every row of source file ``f`` (see ``_files``)."""
    return (BASE_S + 100 * f) * 1000


def test_iceberg_sink_records_each_commits_event_time_range(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = ss.load_catalog("t", type="hadoop", warehouse=warehouse)
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=SCHEMA)
    _files(tmp_path / "in")
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        sink_id="s",
        checkpoint_location=str(tmp_path / "ck"),
        state_dir=str(tmp_path / "state"),
        event_time_column="ts",
    )
    try:
        _run(spark, tmp_path / "in", sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()
    table = catalog.load_table("db.t")
    for snap in table.snapshots():
        f = int(snap.summary["stream-sink.max-committed-checkpoint-id"])  # a file a batch
        assert (snap.summary[EVENT_TIME_LOW_MS], snap.summary[EVENT_TIME_HIGH_MS]) == (
            str(_ms(f)),
            str(_ms(f)),
        )
    position = sink_position(table, "s")
    assert position is not None
    assert (position.event_time_low_ms, position.event_time_high_ms) == (_ms(2), _ms(2))
    assert main(["status", "--table", "db.t", "--warehouse", warehouse]) == 0
    assert "2023-11-14T22:16:40.000Z .. 2023-11-14T22:16:40.000Z" in capsys.readouterr().out


def test_delta_sink_records_each_commits_event_time_range(spark: Any, tmp_path: Path) -> None:
    _files(tmp_path / "in", files=2)
    sink = DeltaSink(
        path=str(tmp_path / "lake"),
        sink_id="d",
        checkpoint_location=str(tmp_path / "ck"),
        state_dir=str(tmp_path / "state"),
        event_time_column="ts",
    )
    try:
        _run(spark, tmp_path / "in", sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()
    position = sink_position(DeltaTable.load(str(tmp_path / "lake")), "d")
    assert position is not None and position.batch_id == 1
    assert (position.event_time_low_ms, position.event_time_high_ms) == (_ms(1), _ms(1))


def test_a_column_the_table_lacks_stops_the_query_before_a_commit(
    spark: Any, tmp_path: Path
) -> None:
    catalog = ss.load_catalog("t", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=pa.schema([pa.field("id", pa.int64())]))
    _files(tmp_path / "in", files=1)
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        sink_id="s",
        checkpoint_location=str(tmp_path / "ck"),
        state_dir=str(tmp_path / "state"),
        event_time_column="ts",
        schema_evolution="none",
    )
    with pytest.raises(Exception, match=r"event_time_column='ts'.*has no such column"):
        try:
            _run(spark, tmp_path / "in", sink.foreach_batch, sink.spark_checkpoint_location)
        finally:
            sink.close()
    assert catalog.load_table("db.t").snapshots() == []
