"""What a user sees of a running sink: the per-commit log line and ``stream-sink status``."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.cli.main import main
from stream_sink.io import FileIO
from stream_sink.metrics.maintenance_report import report_location, write_report
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot
from stream_sink.spark import IcebergSink

SCHEMA = "id BIGINT, v STRING"


def test_status_and_commit_log_after_three_batches_with_a_checkpoint_every_two(
    spark: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wh = str(tmp_path / "wh")
    catalog = ss.load_catalog("local", type="hadoop", warehouse=wh)
    catalog.create_namespace("db")
    catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]))
    write_batches(
        tmp_path / "in", [[{"id": b * 10 + i, "v": "x"} for i in range(b + 1)] for b in range(3)]
    )
    chk = str(tmp_path / "chk")
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        checkpoint_location=chk,
        state_dir=str(tmp_path / "state"),
        checkpoint_interval_batches=2,
    )
    with caplog.at_level(logging.INFO, logger="stream_sink"):
        run_available(
            spark, tmp_path / "in", SCHEMA, sink.foreach_batch, sink.spark_checkpoint_location
        )
    commits = [r.getMessage() for r in caplog.records if "committed batches" in r.getMessage()]
    assert len(commits) == 1 and commits[0].startswith("sink db.t: committed batches 0..1 to db.t")
    assert (
        "2 batches, 3 rows, 1 data files" in commits[0]
        or "2 batches, 3 rows, 2 data files" in commits[0]
    )
    assert "watermark 1" in commits[0] and " ms" in commits[0]

    assert (
        main(["status", "--checkpoint-location", chk, "--warehouse", wh, "--format", "jsonl"]) == 0
    )
    status = json.loads(capsys.readouterr().out)
    assert status["sink_id"] == "db.t" and status["watermark"] == 1
    assert status["pending"] == [2] and status["staged"] == []
    assert status["acknowledged"] == [0, 1, 2] and status["offsets_ahead"] == 1
    assert status["last_checkpoint_id"] == 1 and status["last_commit"]["watermark"] == 1

    sink.close()  # the last checkpoint: batch 2 committed
    assert main(["status", "--checkpoint-location", chk, "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    assert "watermark                   2 " in out and "pending batches             none" in out
    assert main(["table", "show", "db.t", "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    assert "db.t" in out.split("sinks (watermark", 1)[1] and " 2 " in out.split("sinks", 1)[1]

    # in-sink maintenance failing run after run: reported from the sink's report file
    failing = MaintenanceMetricsSnapshot(
        runs=7,
        failures=4,
        consecutive_failures=4,
        failing=True,
        last_error="expire_snapshots: CommitFailedError: lost to another writer",
    )
    write_report(FileIO.for_location(chk), report_location(chk, "db.t"), failing)
    assert main(["status", "--checkpoint-location", chk, "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    assert "7 runs, 4 failed" in out and "4 in a row not completed" in out
    assert "warning" in out and "failed 4 runs in a row" in out


def test_status_without_table_or_catalog_options_reads_the_table_the_sink_recorded(
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The demo's shape: sink id ``demo-orders`` writing ``demo.orders`` of catalog
    ``demo`` under a relative ``warehouse``; ``status`` given only the checkpoint
    location, from another directory too."""
    monkeypatch.chdir(tmp_path)
    catalog = ss.load_catalog("demo", type="hadoop", warehouse="warehouse")
    catalog.create_namespace("demo")
    catalog.create_table("demo.orders", pa.schema([("id", pa.int64()), ("v", pa.string())]))
    write_batches(tmp_path / "in", [[{"id": b, "v": "x"}] for b in range(3)])
    sink = IcebergSink(
        catalog=catalog,
        table="demo.orders",
        sink_id="demo-orders",
        checkpoint_location="checkpoints/demo-orders",
        state_dir="state",
    )
    run_available(
        spark, tmp_path / "in", SCHEMA, sink.foreach_batch, sink.spark_checkpoint_location
    )
    sink.close()
    chk = str(tmp_path / "checkpoints" / "demo-orders")

    def status(*args: str) -> tuple[int, dict[str, Any], str]:
        code = main(["status", "--checkpoint-location", chk, "--format", "jsonl", *args])
        out = capsys.readouterr()
        return code, json.loads(out.out), out.err

    for cwd in (tmp_path, tmp_path / "in"):
        monkeypatch.chdir(cwd)
        code, doc, err = status()
        assert (code, err) == (0, "")
        assert doc["table"] == "demo.orders" and doc["watermark"] == 2
        assert doc["staged"] == [] and doc["pending"] == [] and doc["in_flight"] == []
        assert doc["catalog"] == f"demo ({tmp_path / 'warehouse'})"
    recorded = tmp_path / "checkpoints" / "demo-orders" / "demo-orders" / "_table.json"
    assert json.loads(recorded.read_text())["catalog-settings"] == {
        "type": "hadoop",
        "warehouse": str(tmp_path / "warehouse"),
    }

    # the table dropped and created again: not the sink's table, and nothing is uncommitted
    catalog.drop_table("demo.orders")
    catalog.create_table("demo.orders", pa.schema([("id", pa.int64()), ("v", pa.string())]))
    code, doc, err = status()
    assert code == 1 and doc["watermark"] is None
    assert doc["staged"] is None and doc["pending"] is None
    assert "is not the table this sink wrote" in doc["table_error"]
    assert "cannot read table demo.orders" in err and "unknown" in err

    # the warehouse gone: said so, exit 1; the human form says the batches are unknown
    shutil.rmtree(tmp_path / "warehouse")
    assert main(["status", "--checkpoint-location", chk]) == 1
    out = capsys.readouterr()
    assert "watermark                   unknown: the warehouse" in out.out
    assert "does not exist any more" in out.out and "cannot read table" in out.err
    assert "pending batches             unknown" in out.out
    assert "staged batches              unknown" in out.out
