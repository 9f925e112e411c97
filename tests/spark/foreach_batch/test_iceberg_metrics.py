"""A sink's metrics through a real streaming query: scraped from its metrics port, and
reported per batch by its StreamingQueryListener."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
from prometheus_text import parse_prometheus

import stream_sink as ss
from stream_sink.metrics.sink import SinkMetricsSnapshot
from stream_sink.spark import IcebergSink

BATCHES, ROWS = 3, 10


def write_input(directory: Path) -> None:
    directory.mkdir(parents=True)
    base = time.time() - 1000
    for b in range(BATCHES):
        path = directory / f"batch-{b}.json"
        path.write_text(
            "".join(json.dumps({"id": b * ROWS + i, "data": f"d{i}"}) + "\n" for i in range(ROWS))
        )
        os.utime(path, (base + b, base + b))


def test_scraped_metrics_match_the_committed_table(spark: Any, tmp_path: Path) -> None:
    catalog = ss.load_catalog("m", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table(
        "db.t", schema=pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())])
    )
    write_input(tmp_path / "in")
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        sink_id="metrics-test",
        metrics_port=0,
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    seen: dict[int, SinkMetricsSnapshot] = {}
    listener = sink.progress_listener(lambda batch, snap: seen.__setitem__(batch, snap))
    spark.streams.addListener(listener)
    try:
        df = spark.readStream.schema("id long, data string").option("maxFilesPerTrigger", 1)
        query = (
            df.json(str(tmp_path / "in"))
            .writeStream.foreachBatch(sink.foreach_batch)
            .option("checkpointLocation", sink.spark_checkpoint_location)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        deadline = time.monotonic() + 30
        while len(seen) < BATCHES and time.monotonic() < deadline:
            time.sleep(0.2)  # listener events arrive asynchronously
        assert sink.metrics_server is not None
        with urllib.request.urlopen(sink.metrics_server.url, timeout=10) as response:
            samples = parse_prometheus(response.read().decode())["samples"]
    finally:
        spark.streams.removeListener(listener)
        sink.close()
        if sink.metrics_server is not None:
            sink.metrics_server.close()

    def metric(name: str) -> float:
        return samples[(f"stream_sink_{name}", "metrics-test", "db.t")]

    snaps = catalog.load_table("db.t").snapshots()
    data_files = sum(int(s.summary["added-data-files"]) for s in snaps)
    assert metric("committedDataFilesCount") == data_files == metric("flushedDataFiles")
    assert metric("committedDataFilesRecordCount") == BATCHES * ROWS
    assert metric("committedDeleteFilesCount") == 0 == metric("flushedDeleteFiles")
    assert metric("committedDataFilesByteCount") == sum(
        int(s.summary["added-files-size"]) for s in snaps
    )
    assert 0 <= metric("elapsedSecondsSinceLastSuccessfulCommit") < 120
    assert metric("lastCommitDurationMs") > 0 and metric("lastFlushDurationMs") > 0
    assert sorted(seen) == list(range(BATCHES))
    last = seen[BATCHES - 1]
    assert last.writer.batches == BATCHES and last.writer.last_batch_id == BATCHES - 1
    assert last.committer is not None and last.committer.commits == BATCHES
