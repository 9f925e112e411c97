"""Delta kill tests: the streaming job is killed with SIGKILL (inside the commit protocol,
then at a random moment) and restarted from the same checkpoint location; every change
lands exactly once, and delta-rs and DuckDB's delta extension read every version the
same as the batches its ``txn`` watermark names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from delta_readers import delta_rs_query_rows, delta_rs_rows, duckdb_delta_versions
from kill_harness import (
    KillJob,
    append_batches,
    assert_committed_once,
    kill_rng,
    upsert_batches,
    write_batches,
)

from stream_sink.commit.delta.target import app_id
from stream_sink.delta import DeltaTable
from stream_sink.delta.key_positions import keys_folder
from stream_sink.ops.drill.delete_files import delta_rewrite_versions
from stream_sink.spark.datasource.register import supports_data_source
from stream_sink.spark.query import read_query_id

JOB = Path(__file__).with_name("delta_kill_job.py")
FILES, APPEND_ROWS, KEYS = 5, 30, 10
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.spread]


def prepare(root: Path, files: int = FILES) -> tuple[list[list[dict]], list[list[dict]]]:
    appends = append_batches(files, APPEND_ROWS, p=lambda i: f"p{i % 3}")
    write_batches(root / "append-in", appends)
    upserts, _ = upsert_batches(files, per_file=8, keys=KEYS, seed=5)
    write_batches(root / "upsert-in", upserts)
    return appends, upserts


def latest_after(upserts: list[list[dict]], upto: int) -> list[tuple[int, str]]:
    state: dict[int, str] = {}
    for batch in upserts[: upto + 1]:
        for r in batch:
            state[r["id"]] = r["data"]
    return sorted(state.items())


def job_of(table: DeltaTable) -> str:
    (app,) = table.snapshot.txns
    return app


def test_delta_sigkill_and_restart_keeps_append_and_upsert_exactly_once(tmp_path: Path) -> None:
    appends, upserts = prepare(tmp_path)
    job = KillJob(JOB, [str(tmp_path)], timeout=600)
    job.killed_at("after-metadata-file-write@3")
    job.killed_mid_stream(kill_rng(13))
    job.run_to_end()

    check_exactly_once(tmp_path, appends, upserts, FILES, "spark")


def check_exactly_once(
    root: Path, appends: list[list[dict]], upserts: list[list[dict]], files: int, spark_dir: str
) -> None:
    """Both tables hold every change exactly once, at every version, for every reader;
    each version's ``txn`` names a higher batch than the one before."""
    events = DeltaTable.load(str(root / "lake" / "events"))
    latest = DeltaTable.load(str(root / "lake" / "latest"))
    want_ids = [r["id"] for b in appends for r in b]
    assert sorted(r["id"] for r in delta_rs_rows(events.location)) == sorted(want_ids)
    assert sorted((r["id"], r["data"]) for r in delta_rs_rows(latest.location)) == latest_after(
        upserts, files - 1
    )
    for table, chk in ((events, "dchk-append"), (latest, "dchk-upsert")):
        query_id = read_query_id(str(root / chk / spark_dir))
        # one appId: the restarts kept the query id and the sink id
        assert job_of(table) == app_id(query_id, os.path.basename(table.location))
        app = job_of(table)
        versions = list(range(1, table.version + 1))
        marks = [table.snapshot_at(v).txn_version(app) for v in versions]
        assert_committed_once(marks, os.path.basename(table.location))
        assert marks[-1] == files - 1
        duck = duckdb_delta_versions(table.location, versions)
        for v, mark, rows in zip(versions, marks, duck, strict=True):
            assert mark is not None
            if table is events:
                want = sorted(r["id"] for b in appends[: mark + 1] for r in b)
                assert sorted(r["id"] for r in rows) == want, f"version {v}"
                assert sorted(r["id"] for r in delta_rs_rows(table.location, v)) == want
            else:
                want2 = latest_after(upserts, mark)
                assert sorted((r["id"], r["data"]) for r in rows) == want2, f"version {v}"
                assert (
                    sorted((r["id"], r["data"]) for r in delta_rs_rows(table.location, v)) == want2
                )


def test_delta_positions_killed_resolving_and_at_random_restart_exactly_once(
    tmp_path: Path,
) -> None:
    """``DeltaSink(deletes="positions")``: killed once a commit's deletion vectors are
    written (before the version), then at a random moment, then run to the end. Every
    version holds the batches its ``txn`` names for DuckDB and delta-rs (which applies
    the vectors), no version rewrote a data file, and no keys file is left."""
    _, upserts = prepare(tmp_path)
    job = KillJob(JOB, [str(tmp_path), "foreach-positions"], timeout=600)
    job.killed_at("after-position-deletes@2")
    job.killed_mid_stream(kill_rng(17))
    job.run_to_end()
    latest = DeltaTable.load(str(tmp_path / "lake" / "latest"))
    app = job_of(latest)
    assert app == app_id(read_query_id(str(tmp_path / "dchk-upsert" / "spark")), "latest")
    versions = list(range(1, latest.version + 1))
    marks = [latest.snapshot_at(v).txn_version(app) for v in versions]
    assert_committed_once(marks, "latest")
    assert marks[-1] == FILES - 1
    duck = duckdb_delta_versions(latest.location, versions)
    for v, mark, rows in zip(versions, marks, duck, strict=True):
        assert mark is not None
        want = latest_after(upserts, mark)
        assert sorted((r["id"], r["data"]) for r in rows) == want, f"version {v}"
        got = delta_rs_query_rows(latest.location, v)
        assert sorted((r["id"], r["data"]) for r in got) == want, f"version {v}"
    assert delta_rewrite_versions(latest.location) == []
    keys = Path(keys_folder(latest.location, "latest"))
    assert [p for p in keys.rglob("*") if p.is_file()] == []


SOURCE_FILES = 3
"""Fewer batches on the Data Source route: each commit starts a Python worker."""


@pytest.mark.timeout(900)
@pytest.mark.skipif(not supports_data_source(), reason="format('stream_sink') needs pyspark 4")
def test_delta_data_source_route_killed_and_restarted_exactly_once(tmp_path: Path) -> None:
    """``format("stream_sink")`` with target ``delta``: the commit worker killed after the
    log's temporary file is written (the batch staged, not committed; the query fails),
    then a run to the end from the same checkpoint location. (Random kills of the driver
    are in the foreachBatch test above and in ``stream-sink drill --target delta``.)"""
    appends, upserts = prepare(tmp_path, SOURCE_FILES)
    job = KillJob(JOB, [str(tmp_path), "source"], timeout=600)
    job.failed_at("after-metadata-file-write@1")
    log_dir = tmp_path / "lake" / "events" / "_delta_log"
    assert [p.name for p in log_dir.glob(".*.tmp")]  # the killed commit's temporary
    job.run_to_end()
    check_exactly_once(tmp_path, appends, upserts, SOURCE_FILES, "")


@pytest.mark.timeout(900)
@pytest.mark.skipif(not supports_data_source(), reason="format('stream_sink') needs pyspark 4")
def test_delta_data_source_upsert_killed_after_spilling_keys_restarts_once_and_sweeps_them(
    tmp_path: Path,
) -> None:
    """The upsert stream's commit worker killed after the tasks spilled the keys they
    touched and the batch was staged, before its version was published: the spill files
    stay behind. The restart commits every batch exactly once and removes them."""
    _, upserts = prepare(tmp_path, SOURCE_FILES)
    job = KillJob(JOB, [str(tmp_path), "source-upsert"], timeout=600)
    job.failed_at("after-metadata-file-write@1")
    spills = tmp_path / "dchk-upsert" / "touched-keys"
    left = sorted(p.name for p in spills.rglob("*") if p.is_file())
    assert left and any(n.endswith(".hashes") for n in left)  # the killed batch's spills
    job.run_to_end()
    assert [p for p in spills.rglob("*") if p.is_file()] == []

    latest = DeltaTable.load(str(tmp_path / "lake" / "latest"))
    want = latest_after(upserts, SOURCE_FILES - 1)
    assert sorted((r["id"], r["data"]) for r in delta_rs_rows(latest.location)) == want
    app = job_of(latest)
    assert app == app_id(read_query_id(str(tmp_path / "dchk-upsert")), "latest")
    marks = [latest.snapshot_at(v).txn_version(app) for v in range(1, latest.version + 1)]
    assert_committed_once(marks, "latest")
    assert marks[-1] == SOURCE_FILES - 1
