"""Maintenance that keeps up (no Spark): each run's work is bounded (compaction's files
and bytes, the conversion's equality delete files), every bounded run is exact (our
reader and DuckDB), repeated runs drain the backlog, and the in-sink schedule brings
the next run forward while a backlog is left, so a steady stream's live files stay
bounded."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pytest
from maint_support import SCHEMA, CdcTable, Row, live_counts, make_cdc_table, ours, rows_of
from readers import duckdb_rows

from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.commit.driver import CommitDriver
from stream_sink.exceptions import InvalidOptionError
from stream_sink.maintenance import MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.actions import Maintenance
from stream_sink.table.catalog import Catalog
from stream_sink.table.catalog.metadata_files import STREAMING_METADATA_PROPERTIES
from stream_sink.table.manifest import snapshot_manifests
from stream_sink.write.writer_factory import TaskWriterFactory


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


def _json_size_without_metadata_log(text: str) -> int:
    doc = json.loads(text)
    doc.pop("metadata-log", None)
    return len(json.dumps(doc))


@pytest.mark.slow
def test_a_long_append_stream_s_commits_stay_the_same_size(
    catalog: Catalog, tmp_path: Path
) -> None:
    """The sink's own path (driver, committer with RocksDB state, a checkpoint and a
    commit per batch, in-sink maintenance with expiry): what each commit reads and
    writes (the metadata JSON, the manifest list, the state) stops growing once expiry
    and manifest merging keep up, so commit latency cannot grow with the commit count."""
    table = catalog.create_table(
        "db.t",
        schema=SCHEMA,
        properties={**STREAMING_METADATA_PROPERTIES, "commit.manifest.min-count-to-merge": "8"},
    )
    committer = FilesCommitter(
        IcebergTarget(table),
        StateDirectory(str(tmp_path / "state"), kind="rocksdb"),
        CheckpointStorage(str(tmp_path / "checkpoints"), "t"),
        job_id="job",
        operator_id="t",
    )
    options = MaintenanceOptions(
        commit_count=5, max_snapshot_age_ms=0, retain_last=4, background=False
    )
    maintenance = SinkMaintenance(lambda: catalog.load_table("db.t"), options, "sink:t")
    maintenance.protect(committer.uncommitted_paths)
    driver = CommitDriver(after_checkpoint=lambda _: maintenance.after_commit(table.metadata))
    driver.open("t", committer, None)
    sizes: list[tuple[int, int, int, int, int]] = []
    expected: list[Row] = []
    try:
        for b in range(60):
            rows = [(b * 5 + i, f"c{b % 3}", b) for i in range(5)]
            expected += rows
            writer = TaskWriterFactory.for_table(table).create(0, b)
            writer.write(
                pa.Table.from_pylist(
                    [dict(zip(SCHEMA.names, r, strict=True)) for r in rows], SCHEMA
                )
            )
            driver.record(b, {"t": writer.complete()})
            meta = table.metadata
            head = table.current_snapshot()
            assert head is not None
            manifests = len(snapshot_manifests(table.io, head))
            state_keys = sum(1 for _ in committer.state.scan())
            sizes.append(
                (
                    len(meta.snapshots),
                    manifests,
                    len(meta.metadata_log),
                    _json_size_without_metadata_log(meta.to_json()),
                    state_keys,
                )
            )
    finally:
        driver.close()
    m = maintenance.metrics
    assert (m.failures, m.runs) == (0, 12), m.last_error
    late = sizes[25:]
    assert max(s[0] for s in late) <= 4 + 5 + 1  # retained, plus the commits between runs
    assert max(s[1] for s in late) <= 8  # merged once min-count-to-merge is reached
    assert max(s[2] for s in late) <= 50  # write.metadata.previous-versions-max
    # the metadata log alone grows to its bound (above); the rest of the JSON stays flat
    assert max(s[3] for s in late) <= 1.2 * max(s[3] for s in sizes[15:25])
    assert max(s[4] for s in sizes) == 0  # every batch committed: nothing left staged
    assert ours(table) == sorted(expected)
    assert rows_of(duckdb_rows(table.refresh().metadata_location)) == sorted(expected)
