"""What a user sees of a running sink: the per-commit log line and ``stream-sink status``."""

from __future__ import annotations

import json
import logging
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
