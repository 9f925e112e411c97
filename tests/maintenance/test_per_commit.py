"""In-sink maintenance where every commit runs in a fresh process (the Data Source
route): a ``SinkMaintenance`` built per commit from the report file behaves as one
long-lived sink's (the same runs after the same commits, the same failures in a row and
``failing``), keeps the table bounded and exact, and survives an unreadable report.
No Spark: commits go through the same writers, one row delta per batch."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from maint_support import CdcTable, live_counts, make_cdc_table, ours, rows_of
from readers import duckdb_rows

from stream_sink.io.fileio import FileIO
from stream_sink.maintenance import MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.lease_lock import sink_lock_location
from stream_sink.maintenance.per_commit import maintain_after_commit
from stream_sink.maintenance.triggers import TriggerState
from stream_sink.metrics.maintenance_report import read_report, read_report_and_trigger
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot
from stream_sink.table.catalog import Catalog
from stream_sink.table.metadata import TableMetadata

Seen = tuple[int, int, int, bool, int, int]


def _seen(m: MaintenanceMetricsSnapshot) -> Seen:
    return (
        m.runs,
        m.failures,
        m.consecutive_failures,
        m.failing,
        m.rewritten_data_files,
        m.converted_equality_delete_files,
    )


def _stream(
    catalog: Catalog,
    name: str,
    batches: int,
    after: Callable[[TableMetadata], MaintenanceMetricsSnapshot],
    properties: dict[str, str] | None = None,
) -> tuple[CdcTable, list[Seen]]:
    """``batches`` upsert commits into a new table ``name``, ``after`` called with the
    metadata of each; what it reported after each commit."""
    cdc = make_cdc_table(catalog, name, batches=0, rows=0, seed=5, properties=properties)
    seen = []
    for _ in range(batches):
        cdc.commit_batch(12)
        seen.append(_seen(after(cdc.table.refresh().metadata)))
    return cdc, seen


def _per_commit(
    catalog: Catalog, tmp_path: Path, name: str, options: MaintenanceOptions
) -> tuple[str, Callable[[TableMetadata], MaintenanceMetricsSnapshot]]:
    """Maintenance as each commit of a Data Source stream runs it: resumed from the
    report, run in the foreground, saved back; the report's location."""
    chk = str(tmp_path / "chk")
    report = f"{chk}/{name}/maintenance.json"

    def after(metadata: TableMetadata) -> MaintenanceMetricsSnapshot:
        return maintain_after_commit(
            lambda: catalog.load_table(name),
            metadata,
            options,
            owner=f"sink:{name}",
            io=FileIO.for_location(report),
            report=report,
            lock_location=sink_lock_location(chk, name),
        ).metrics

    return report, after


def _long_lived(
    catalog: Catalog, name: str, options: MaintenanceOptions
) -> Callable[[TableMetadata], MaintenanceMetricsSnapshot]:
    m = SinkMaintenance(lambda: catalog.load_table(name), options, f"sink:{name}")

    def after(metadata: TableMetadata) -> MaintenanceMetricsSnapshot:
        m.after_commit(metadata)
        return m.metrics

    return after


def test_a_sink_resumed_at_every_commit_runs_as_a_long_lived_one(
    catalog: Catalog, tmp_path: Path
) -> None:
    options = MaintenanceOptions(
        commit_count=3, max_snapshot_age_ms=0, retain_last=2, min_input_files=3, background=False
    )
    batches = 14
    # background=True is what a user may pass: each commit runs it in the foreground anyway
    report, per_commit = _per_commit(
        catalog, tmp_path, "db.fresh", dataclasses.replace(options, background=True)
    )
    fresh, fresh_seen = _stream(catalog, "db.fresh", batches, per_commit)
    kept, kept_seen = _stream(catalog, "db.kept", batches, _long_lived(catalog, "db.kept", options))

    assert fresh_seen == kept_seen
    assert [runs for runs, *_ in fresh_seen] == [(b + 1) // 3 for b in range(batches)]
    m = read_report(FileIO.for_location(report), report)
    assert m is not None and m.runs == batches // 3 and m.failures == 0, m
    assert m.rewritten_data_files > 0 and m.expired_snapshots > 0
    assert live_counts(fresh.table) == live_counts(kept.table)
    assert len(fresh.table.refresh().snapshots()) <= 2 + 3 + 2  # retained + a trigger's worth
    assert ours(fresh.table) == fresh.expected() == kept.expected()
    assert rows_of(duckdb_rows(fresh.table.metadata_location)) == fresh.expected()
    # the triggers' state saved beside the metrics: the head it counted up to
    _, trigger = read_report_and_trigger(FileIO.for_location(report), report)
    assert trigger is not None
    assert trigger["seen_snapshot_id"] == fresh.table.current_snapshot().snapshot_id
    assert trigger["commits"] == batches % 3


def test_failures_in_a_row_and_failing_carry_over_from_commit_to_commit(
    catalog: Catalog, tmp_path: Path
) -> None:
    """Every run fails (an unreadable expiry setting): counted, retried with the same
    back-off, ``failing`` from ``failures_before_alert`` in a row; the stream goes on."""
    options = MaintenanceOptions(
        commit_count=4,
        rewrite_data_files=False,
        convert_equality_deletes=False,
        failures_before_alert=2,
        background=False,
    )
    bad = {"history.expire.max-snapshot-age-ms": "soon"}
    report, per_commit = _per_commit(catalog, tmp_path, "db.fresh", options)
    fresh, fresh_seen = _stream(catalog, "db.fresh", 10, per_commit, bad)
    _, kept_seen = _stream(catalog, "db.kept", 10, _long_lived(catalog, "db.kept", options), bad)

    assert fresh_seen == kept_seen
    m = read_report(FileIO.for_location(report), report)
    assert m is not None and m.runs >= 3 and m.failures == m.runs
    assert m.failing and m.consecutive_failures == m.runs
    assert "history.expire.max-snapshot-age-ms" in (m.last_error or "")
    assert ours(fresh.table) == fresh.expected()


def test_an_unreadable_report_starts_counting_from_zero(catalog: Catalog, tmp_path: Path) -> None:
    options = MaintenanceOptions(commit_count=2, background=False)
    report, per_commit = _per_commit(catalog, tmp_path, "db.t", options)
    Path(report).parent.mkdir(parents=True)
    Path(report).write_text("{not json")
    cdc, seen = _stream(catalog, "db.t", 4, per_commit)
    assert [runs for runs, *_ in seen] == [0, 1, 1, 2]
    doc = json.loads(Path(report).read_text())
    assert doc["runs"] == 2 and doc["trigger"]["commits"] == 0

    # the saved state round-trips; one that is not a saved state restores as a fresh one
    state = TriggerState.restored(options, doc["trigger"], now_ms=1)
    assert state.saved() == doc["trigger"]
    for garbage in (None, {}, {"commits": "x"}, {"last_run_ms": 5}):
        fresh = TriggerState.restored(options, garbage, now_ms=7)
        assert fresh.saved() == TriggerState(options, last_run_ms=7).saved()
    assert ours(cdc.table) == cdc.expected()
