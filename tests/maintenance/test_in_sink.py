"""In-sink maintenance driven the way the sink drives it (committer harness, no Spark):
file and snapshot counts stay bounded over a long upsert stream, the watermark and
every row survive, and failures or a held lock are counted, never raised.

Tests stream_sink.maintenance.in_sink: SinkMaintenance driven by the committer.
Tests stream_sink.maintenance.expiry: snapshot expiry keeping the snapshot count bounded."""

from __future__ import annotations

import random
from pathlib import Path

from maint_support import SCHEMA, CdcTable, live_counts, ours, rows_of, to_arrow
from prometheus_text import parse_prometheus
from readers import duckdb_rows

from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory, committed_watermark
from stream_sink.maintenance import MaintenanceLock, MaintenanceOptions, SinkMaintenance
from stream_sink.metrics.prometheus import render
from stream_sink.metrics.sink import SinkMetricsSnapshot, WriterMetrics
from stream_sink.table.catalog import Catalog
from stream_sink.write.writer_factory import TaskWriterFactory


def _stream(
    catalog: Catalog,
    tmp_path: Path,
    options: MaintenanceOptions,
    batches: int,
    properties: dict[str, str] | None = None,
    name: str = "db.t",
    lock_location: str | None = None,
) -> tuple[CdcTable, SinkMaintenance, list[dict[str, int]]]:
    table = catalog.create_table(
        name, schema=SCHEMA, identifier_fields=["id"], properties=properties or {}
    )
    cdc = CdcTable(table, random.Random(11))
    committer = FilesCommitter(
        IcebergTarget(catalog.load_table(name)),
        StateDirectory(str(tmp_path / "state"), kind="memory"),
        None,
        job_id="job",
        operator_id="sink",
    )
    committer.restore()
    maintenance = SinkMaintenance(
        lambda: catalog.load_table(name),
        options,
        "sink:test",
        committer.uncommitted_paths,
        lock_location=lock_location,
    )
    counts = []
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
    for b in range(batches):
        writer = factory.create(0, b)
        writer.write(to_arrow(cdc.batch(15)))
        committer.process(b, writer.complete())
        committer.snapshot_state(b)
        committer.notify_checkpoint_complete(b)
        maintenance.after_commit(table.refresh().metadata)
        counts.append({**live_counts(table), "snapshots": len(table.refresh().snapshots())})
    maintenance.wait()
    committer.close()
    return cdc, maintenance, counts


def test_long_stream_stays_bounded(catalog: Catalog, tmp_path: Path) -> None:
    options = MaintenanceOptions(
        commit_count=8, max_snapshot_age_ms=0, retain_last=3, min_input_files=4, background=False
    )
    cdc, maintenance, counts = _stream(catalog, tmp_path, options, batches=48)
    table = cdc.table
    late = counts[16:]
    assert max(c["snapshots"] for c in late) <= 3 + 8 + 4  # retained + one trigger's worth
    assert max(c["data"] for c in late) <= 4 + 8
    assert max(c["eq"] for c in late) <= 8
    assert maintenance.metrics.runs == 48 // 8
    assert maintenance.metrics.failures == 0 and maintenance.metrics.conflicts == 0
    assert committed_watermark(table.refresh().metadata, "job", "sink") == 47
    assert ours(table) == cdc.expected()
    assert rows_of(duckdb_rows(table.metadata_location)) == cdc.expected()


def test_failures_and_a_held_lock_are_counted_not_raised(catalog: Catalog, tmp_path: Path) -> None:
    options = MaintenanceOptions(
        commit_count=2, rewrite_data_files=False, convert_equality_deletes=False, background=True
    )
    # an unreadable expiry setting makes every run fail
    cdc, maintenance, _ = _stream(
        catalog,
        tmp_path,
        options,
        batches=6,
        properties={"history.expire.max-snapshot-age-ms": "soon"},
    )
    m = maintenance.metrics
    assert m.runs >= 1 and m.failures == m.runs
    assert "history.expire.max-snapshot-age-ms" in (m.last_error or "")
    # ... and exported with the sink's other metrics
    text = render([SinkMetricsSnapshot("sink", "db.t", WriterMetrics().snapshot(), None, m)])
    samples = parse_prometheus(text)["samples"]
    assert samples[("stream_sink_maintenanceFailures", "sink", "db.t")] == m.failures
    assert samples[("stream_sink_maintenanceRuns", "sink", "db.t")] == m.runs
    assert ours(cdc.table) == cdc.expected()

    table = catalog.load_table("db.t")
    held = MaintenanceLock.for_table(table, "cli")
    assert held.try_acquire()
    try:
        runner = SinkMaintenance(
            lambda: catalog.load_table("db.t"),
            MaintenanceOptions(commit_count=1, background=False),
            "sink:x",
        )
        assert runner.after_commit(table.metadata)
        assert runner.metrics.skipped_locked == 1 and runner.metrics.failures == 0
    finally:
        held.release()
