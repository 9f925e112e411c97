"""In-sink maintenance racing its sink's commits, hundreds of times (no Spark): the
sink commits upserts in a loop while the maintenance runs in its background thread.
No maintenance run is lost to the sink, every run completes, the table's snapshots,
files and metadata files stay bounded, and every row is as the model says (read back
by DuckDB too). A run that fails is retried at the next commit and reported.

The race is checked to have happened, not assumed: at least a hundred of the sink's
commits are made while a run is under way, and in one process the commits of the
sink and of its maintenance take turns (:mod:`stream_sink.table.commit_lock`), so a
maintenance commit never loses a compare-and-swap to the sink and never retries;
instead it is validated against, and built on, the sink's commits made since it
planned. Those are counted from the table itself: a compaction's new files keep the
sequence number of the snapshot it planned on, its snapshot gets the one of its
commit, and a gap of more than one is sink commits that landed in between."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from maint_support import SCHEMA, CdcTable, live_counts, ours, rows_of
from readers import duckdb_rows

from stream_sink.maintenance import MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.metadata_files import metadata_files_warning
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import (
    DataFileContent,
    ManifestEntryStatus,
    read_manifest,
    read_manifest_list,
    snapshot_manifests,
)
from stream_sink.table.metadata_commit import commit_metadata_change
from stream_sink.table.table import Table

COMMITS = 200
RUNS = 6
RACING = 100
"""Sink commits made while a maintenance run was under way, at the least."""
MAX_AGE = "history.expire.max-snapshot-age-ms"


def _metadata_json_files(cdc: CdcTable) -> int:
    folder = Path(cdc.table.metadata_location.removeprefix("file:")).parent
    return sum(1 for p in folder.iterdir() if p.name.endswith(".metadata.json"))


def _compactions(table: Table, seen: set[int]) -> list[int]:
    """For each compaction committed since the snapshots in ``seen`` (then added to it):
    how many commits landed between its plan and its commit (see module doc)."""
    gaps = []
    for snap in table.snapshots():
        if snap.snapshot_id in seen:
            continue
        seen.add(snap.snapshot_id)
        if snap.operation != "replace":
            continue
        planned = [
            e.sequence_number
            for m in snapshot_manifests(table.io, snap)
            if m.added_snapshot_id == snap.snapshot_id
            for e in read_manifest(table.io, m)
            if e.status == ManifestEntryStatus.ADDED
            and e.data_file.content == DataFileContent.DATA
            and e.sequence_number is not None
        ]
        if planned:
            gaps.append(snap.sequence_number - min(planned) - 1)
    return gaps


@pytest.mark.slow  # 200+ commits: most of a minute on a loaded 2-core machine
def test_maintenance_racing_the_sink_never_fails(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t",
        schema=SCHEMA,
        partition_spec=[("bucket", "id", 4)],
        identifier_fields=["id"],
        properties={"write.metadata.previous-versions-max": "10"},
    )
    cdc = CdcTable(table, random.Random(5))
    reports: list[MaintenanceMetricsSnapshot] = []
    maintenance = SinkMaintenance(
        lambda: catalog.load_table("db.t"),
        MaintenanceOptions(
            commit_count=4,
            max_snapshot_age_ms=0,
            retain_last=3,
            min_input_files=2,
            # the floor below assumes a run compacts all it plans: on a slow machine a run
            # spans tens of commits and would reach the per-run bound (test_bounded.py)
            max_rewrite_files_per_run=None,
            max_rewrite_bytes_per_run=None,
            max_equality_delete_files_per_run=None,
        ),
        "sink:race",
        report=reports.append,
    )
    started, last_start, sampled, i = 0, 0, 0, 0
    excess: dict[str, int] = {}
    seen: set[int] = set()
    gaps: list[int] = []  # per compaction: the sink's commits between its plan and commit
    racing = 0  # sink commits made while a run was under way
    # however slow the machine; and, however fast, until the race happened (bounded)
    while i < COMMITS or sampled < RUNS or ((not any(gaps) or racing < RACING) and i < 5 * COMMITS):
        racing += maintenance.running
        cdc.commit_batch(8)  # the sink's commit, racing a run under way
        gaps += _compactions(table.refresh(), seen)
        runs = maintenance.metrics.runs
        if i >= COMMITS // 4 and runs > sampled and not maintenance.running:
            # the last run, started after commit `last_start`, is done: what is left over
            # is what the commits since it started added (at most one file of each kind
            # per bucket each), on top of a floor (retained snapshots, compacted files,
            # the metadata log) and the run's own commits
            sampled, since = runs, i - last_start
            counts = {**live_counts(table), "snapshots": len(table.refresh().snapshots())}
            counts["metadata"] = _metadata_json_files(cdc)
            floor = {"snapshots": 3 + since, "data": 4 + 4 * since, "eq": 4 * since}
            floor["metadata"] = 1 + 10 + since
            for k, v in floor.items():
                excess[k] = max(excess.get(k, 0), counts[k] - v)
        if maintenance.after_commit(table.refresh().metadata):
            started, last_start = started + 1, i
        i += 1
    maintenance.wait()

    m = maintenance.metrics
    assert m.runs == started == len(reports) >= RUNS
    assert (m.failures, m.conflicts, m.consecutive_failures) == (0, 0, 0), m.last_error
    assert m.expired_snapshots > 0 and m.removed_metadata_files > 0
    assert excess and max(excess.values()) <= 4, excess  # the run's own commits at most
    # the race happened: hundreds of sink commits during runs, and compactions committed
    # over sink commits made since they planned (validated against them, not retried)
    assert racing >= RACING and any(gaps), (racing, gaps)
    assert ours(table) == cdc.expected()
    assert rows_of(duckdb_rows(table.refresh().metadata_location)) == cdc.expected()


def test_a_failing_run_is_retried_and_reported(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t",
        schema=SCHEMA,
        identifier_fields=["id"],
        properties={MAX_AGE: "soon"},
    )
    cdc = CdcTable(table, random.Random(3))
    options = MaintenanceOptions(
        commit_count=50, rewrite_data_files=False, background=False, failures_before_alert=3
    )
    maintenance = SinkMaintenance(lambda: catalog.load_table("db.t"), options, "sink:x")
    cdc.commit_batch(5)
    maintenance._trigger.commits = 50  # the trigger is due at the next commit
    started = []
    for _ in range(12):
        cdc.commit_batch(5)
        started.append(maintenance.after_commit(table.refresh().metadata))
    m = maintenance.metrics
    # retried after 1, 1, 2, 4 commits ... (not at every commit, never given up)
    assert started.count(True) == m.runs == m.failures == m.consecutive_failures >= 4
    assert m.failing and MAX_AGE in (m.last_error or "")

    commit_metadata_change(table, lambda meta: meta.with_properties({}, (MAX_AGE,)))
    for _ in range(70):  # the setting fixed: the next retry completes
        cdc.commit_batch(1)
        if maintenance.after_commit(table.refresh().metadata) and not maintenance.metrics.failing:
            break
    m = maintenance.metrics
    assert m.consecutive_failures == 0 and not m.failing and m.last_success_ms is not None
    assert ours(table) == cdc.expected()


def test_old_metadata_files_are_removed_and_warned_about(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t",
        schema=SCHEMA,
        identifier_fields=["id"],
        properties={"write.metadata.previous-versions-max": "5"},
    )
    cdc = CdcTable(table, random.Random(1))
    for _ in range(20):
        cdc.commit_batch(3)
    assert _metadata_json_files(cdc) == 21
    assert "15 old metadata files are kept" in (metadata_files_warning(table) or "")
    m = table.maintenance
    dry = m.remove_old_metadata_files(dry_run=True)
    assert len(dry.files) == 21 - 1 - 5 and dry.removed == 0 and _metadata_json_files(cdc) == 21
    first = m.remove_old_metadata_files(max_files=10)
    assert (first.removed, first.remaining) == (10, 5)
    second = m.remove_old_metadata_files()
    assert (second.removed, second.remaining) == (5, 0)
    kept = {str(e.value) for e in table.refresh().metadata.metadata_log}
    assert _metadata_json_files(cdc) == 1 + len(kept) == 6
    assert metadata_files_warning(table) is None
    assert ours(table) == cdc.expected()
    assert rows_of(duckdb_rows(table.metadata_location)) == cdc.expected()


def test_manifests_holding_only_deleted_files_are_not_carried_forward(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t",
        schema=SCHEMA,
        partition_spec=[("bucket", "id", 4)],
        identifier_fields=["id"],
    )
    cdc = CdcTable(table, random.Random(9))
    m = table.maintenance
    for _ in range(6):  # four upserts, then compaction and conversion replace their files
        for _ in range(4):
            cdc.commit_batch(8)
        m.rewrite_data_files(min_input_files=2)
        m.convert_equality_deletes()
    cdc.commit_batch(8)
    head = table.refresh().current_snapshot()
    assert head is not None
    manifests = read_manifest_list(table.io, head.manifest_list)
    carried = [m for m in manifests if m.added_snapshot_id != head.snapshot_id]
    assert all(m.has_added_files or m.has_existing_files for m in carried)
    assert len(manifests) <= 12  # not one per commit and compaction since the start
    assert ours(table) == cdc.expected()
    assert rows_of(duckdb_rows(table.metadata_location)) == cdc.expected()
