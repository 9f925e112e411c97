"""Prometheus export without Spark: exposition text, labels, the HTTP endpoint, and the
counters fed by real WriteResults and committer commits."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_text import parse_prometheus

import stream_sink as ss
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.metrics.prometheus import METRICS, MetricsRegistry, render, serve
from stream_sink.metrics.sink import SinkMetricsSnapshot, WriterMetrics
from stream_sink.spark import IcebergSink
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.write.result import WriteResult

FLINK_NAMES = {
    "lastCheckpointDurationMs",
    "lastCommitDurationMs",
    "elapsedSecondsSinceLastSuccessfulCommit",
    "committedDataFilesCount",
    "committedDataFilesRecordCount",
    "committedDataFilesByteCount",
    "committedDeleteFilesCount",
    "committedDeleteFilesRecordCount",
    "committedDeleteFilesByteCount",
    "flushedDataFiles",
    "flushedDeleteFiles",
    "flushedReferencedDataFiles",
    "lastFlushDurationMs",
}


def data_file(path: str, rows: int, size: int, content: DataFileContent) -> DataFile:
    return DataFile(content, path, FileFormat.PARQUET, 0, (), rows, size)


DATA = DataFileContent.DATA
EQ = DataFileContent.EQUALITY_DELETES


def snapshot_after_one_batch() -> SinkMetricsSnapshot:
    result = WriteResult(
        data_files=(data_file("a", 10, 100, DATA), data_file("b", 5, 50, DATA)),
        delete_files=(data_file("d", 3, 30, EQ),),
        referenced_data_files=("a",),
    )
    writer = WriterMetrics()
    writer.flushed(4, result, 12.5)
    now = [100.0]
    committer = CommitterMetrics(clock=lambda: now[0])
    committer.checkpoint_duration(7.0)
    committer.committed(3.0, [*result.data_files, *result.delete_files])
    now[0] = 102.5
    return SinkMetricsSnapshot('orders "eu"', "db.orders", writer.snapshot(), committer.snapshot())


def test_every_metric_has_a_flink_name_a_type_and_a_labelled_sample() -> None:
    parsed = parse_prometheus(render([snapshot_after_one_batch()]))
    names = {m.name for m in METRICS}
    assert names >= FLINK_NAMES
    assert {n.removeprefix("stream_sink_") for n in parsed["types"]} == names
    s = {
        name.removeprefix("stream_sink_"): v
        for (name, sink, table), v in parsed["samples"].items()
        if sink == 'orders \\"eu\\"' and table == "db.orders"
    }
    assert s["committedDataFilesCount"] == 2 and s["committedDataFilesRecordCount"] == 15
    assert s["committedDataFilesByteCount"] == 150
    assert s["committedDeleteFilesCount"] == 1 and s["committedDeleteFilesRecordCount"] == 3
    assert s["committedDeleteFilesByteCount"] == 30
    assert s["flushedDataFiles"] == 2 and s["flushedDeleteFiles"] == 1
    assert s["flushedReferencedDataFiles"] == 1 and s["flushedDataFilesRecordCount"] == 15
    assert s["lastFlushDurationMs"] == 12.5 and s["lastCheckpointDurationMs"] == 7.0
    assert s["lastCommitDurationMs"] == 3.0
    assert s["elapsedSecondsSinceLastSuccessfulCommit"] == 2.5
    # Flink's counter names kept: exposed as gauges, as Flink's Prometheus reporter does
    # (a Prometheus counter's samples must end in _total)
    assert parsed["types"]["stream_sink_committedDataFilesCount"] == "gauge"
    assert parsed["types"]["stream_sink_lastCommitDurationMs"] == "gauge"


def test_writer_counters_add_up_over_batches() -> None:
    writer = WriterMetrics()
    one = WriteResult(data_files=(data_file("a", 10, 100, DATA),))
    writer.flushed(0, one, 1.0)
    writer.flushed(1, one, 2.0)
    s = writer.snapshot()
    assert (s.flushed_data_files, s.flushed_data_records, s.flushed_data_bytes) == (2, 20, 200)
    assert (s.batches, s.last_batch_id, s.last_flush_duration_ms) == (2, 1, 2.0)


def scrape(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers["Content-Type"], response.read().decode()


def table_t(tmp_path: Path) -> Catalog:
    """A catalog holding the table ``db.t`` (a sink's table must exist)."""
    catalog = ss.load_catalog("m", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    return catalog


def test_endpoint_serves_registered_sinks_and_forgets_discarded_ones(tmp_path: Path) -> None:
    catalog = table_t(tmp_path)
    registry = MetricsRegistry()
    server = serve(0, registry=registry)
    try:
        sink = IcebergSink(
            catalog=catalog, table="db.t", sink_id="s1", checkpoint_location=str(tmp_path / "chk")
        )
        registry.register(sink)
        ctype, body = scrape(server.url)
        assert ctype.startswith("text/plain; version=0.0.4")
        samples = parse_prometheus(body)["samples"]
        assert samples[("stream_sink_flushedDataFiles", "s1", "db.t")] == 0
        # no committer yet: committer metrics have no sample
        assert ("stream_sink_committedDataFilesCount", "s1", "db.t") not in samples
        del sink
        assert parse_prometheus(scrape(server.url)[1])["samples"] == {}
        with pytest.raises(urllib.error.HTTPError, match="404"):
            scrape(server.url.replace("/metrics", "/other"))
    finally:
        server.close()


def test_sink_metrics_port_serves_the_default_registry(tmp_path: Path) -> None:
    catalog = table_t(tmp_path)
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        sink_id="port-sink",
        metrics_port=0,
        checkpoint_location=str(tmp_path / "chk"),
    )
    assert sink.metrics_server is not None
    try:
        assert sink.metrics_server.url.startswith("http://127.0.0.1:")
        samples = parse_prometheus(scrape(sink.metrics_server.url)[1])["samples"]
        assert ("stream_sink_flushedDataFiles", "port-sink", "db.t") in samples
    finally:
        sink.metrics_server.close()
