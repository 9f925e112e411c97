"""Maintenance that keeps up (no Spark): each run's work is bounded (compaction's files
and bytes, the conversion's equality delete files), every bounded run is exact (our
reader and DuckDB), repeated runs drain the backlog, and the in-sink schedule brings
the next run forward while a backlog is left, so a steady stream's live files stay
bounded."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from maint_support import SCHEMA, CdcTable, live_counts, make_cdc_table, ours, rows_of
from readers import duckdb_rows

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import InvalidOptionError
from stream_sink.maintenance import MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.actions import Maintenance
from stream_sink.table.catalog import Catalog


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    c = load_catalog("m", type="hadoop", warehouse=str(tmp_path / "wh"))
    c.create_namespace("db")
    return c


def test_compaction_rewrites_at_most_its_bound_and_drains_in_runs(catalog: Catalog) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=12, rows=20, seed=1)
    m = Maintenance(cdc.table)
    m.convert_equality_deletes()  # position deletes only: every data file qualifies
    before = live_counts(cdc.table)["data"]
    rewritten = []
    for _ in range(20):
        r = m.rewrite_data_files(min_input_files=2, max_files=4)
        if not r.rewritten_data_files:
            break
        assert r.rewritten_data_files <= 4
        rewritten.append(r.rewritten_data_files)
        assert ours(cdc.table) == cdc.expected()
    assert len(rewritten) >= 3 and r.remaining_files == 0, rewritten
    assert live_counts(cdc.table)["data"] < before
    assert rows_of(duckdb_rows(cdc.table.refresh().metadata_location)) == cdc.expected()


def test_compaction_byte_bound_still_progresses(catalog: Catalog) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=6, rows=20, seed=2)
    r = Maintenance(cdc.table).rewrite_data_files(min_input_files=2, max_bytes=1)
    assert r.rewritten_data_files == 1 and r.remaining_files > 0  # one file over the bound
    assert ours(cdc.table) == cdc.expected()


def test_conversion_converts_the_oldest_delete_files_first(catalog: Catalog) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=8, rows=30, seed=3)
    m = Maintenance(cdc.table)
    eq = live_counts(cdc.table)["eq"]
    assert eq >= 5
    runs = 0
    while live_counts(cdc.table)["eq"]:
        c = m.convert_equality_deletes(max_files=2)
        runs += 1
        assert c.removed_equality_delete_files <= 2
        assert c.remaining_equality_delete_files == live_counts(cdc.table)["eq"]
        assert ours(cdc.table) == cdc.expected()
        if runs <= 2:
            cdc.commit_batch(5)  # the stream goes on between runs
        assert runs < 50
    assert runs >= 3
    assert rows_of(duckdb_rows(cdc.table.refresh().metadata_location)) == cdc.expected()
    with pytest.raises(InvalidOptionError, match="max_files"):
        m.convert_equality_deletes(max_files=0)


@pytest.mark.slow
def test_a_backlog_brings_the_next_run_forward_and_stays_bounded(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t", schema=SCHEMA, partition_spec=[("bucket", "id", 4)], identifier_fields=["id"]
    )
    cdc = CdcTable(table, random.Random(7))
    options = MaintenanceOptions(
        commit_count=8,
        min_input_files=2,
        max_rewrite_files_per_run=6,
        max_equality_delete_files_per_run=6,
        max_snapshot_age_ms=0,
        retain_last=3,
        background=False,
    )
    maintenance = SinkMaintenance(lambda: catalog.load_table("db.t"), options, "sink:b")
    started, peak_late = [], {"data": 0, "eq": 0}
    for i in range(64):
        cdc.commit_batch(10)
        started.append(maintenance.after_commit(table.refresh().metadata))
        if i >= 32:
            counts = live_counts(table)
            peak_late = {k: max(peak_late[k], counts[k]) for k in peak_late}
    m = maintenance.metrics
    assert (m.failures, m.conflicts) == (0, 0), m.last_error
    # with up to 4 files of each kind per commit and 6 per run, a run every 8th commit
    # falls behind: the backlog makes runs more frequent than commit_count alone (8)
    assert m.backlog_runs > 0 and m.runs > 64 // 8 + 3, (m.runs, m.backlog_runs)
    assert peak_late["eq"] <= 8 and peak_late["data"] <= 40, peak_late
    assert ours(table) == cdc.expected()
    assert rows_of(duckdb_rows(table.refresh().metadata_location)) == cdc.expected()


def test_per_run_bounds_are_checked() -> None:
    with pytest.raises(InvalidOptionError, match="max_rewrite_files_per_run"):
        MaintenanceOptions(max_rewrite_files_per_run=1)
    with pytest.raises(InvalidOptionError, match="max_equality_delete_files_per_run"):
        MaintenanceOptions(max_equality_delete_files_per_run=0)
