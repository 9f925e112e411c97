"""Kill tests: the streaming query's process is killed with SIGKILL (at a failpoint, and at
random moments mid-stream) and restarted from the same checkpoint location; the final
tables hold every row exactly once (append) and every key's last value (upsert)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kill_harness import (
    KillJob,
    append_batches,
    assert_committed_once,
    iceberg_marks,
    kill_rng,
    upsert_batches,
    write_batches,
)
from readers import duckdb_rows

import stream_sink as ss
from stream_sink.spark.datasource.register import supports_data_source

JOB = Path(__file__).with_name("kill_job.py")
# 12 micro-batches in all: the kill at the third staged write and the random one land
# mid-stream
FILES, APPEND_ROWS, KEYS = 6, 40, 12
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.spread]


def write_input(root: Path, files: int, seed: int = 3) -> dict[int, str]:
    """The kill job's two inputs (append, then upsert); every key's last value."""
    write_batches(root / "append-in", append_batches(files, APPEND_ROWS))
    upserts, latest = upsert_batches(files, per_file=10, keys=KEYS, seed=seed)
    write_batches(root / "upsert-in", upserts)
    return latest


def prepare(
    root: Path,
    files: int = FILES,
    catalog: Any = None,
    namespace: str = "db",
    format_version: int = 2,
) -> dict[int, str]:
    """The tables ``<namespace>.events`` and ``.latest`` (in ``catalog``, by default a
    Hadoop catalog under ``root/warehouse``; of ``format_version``) and the input files;
    the upsert stream's last value per key."""
    if catalog is None:
        catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(root / "warehouse"))
        catalog.create_namespace(namespace)
    catalog.create_table(
        f"{namespace}.events",
        schema=pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())]),
        format_version=format_version,
    )
    catalog.create_table(
        f"{namespace}.latest",
        schema=pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())]),
        identifier_fields=["id"],
        format_version=format_version,
    )
    return write_input(root, files)


def kill_job(
    root: Path,
    route: str = "foreach",
    master: str = "local[2]",
    env: Mapping[str, str] | None = None,
) -> KillJob:
    """``kill_job.py`` on ``root``: ``foreach`` (IcebergSink.foreach_batch) or ``source``
    (``format("stream_sink")``), on ``master``."""
    return KillJob(JOB, [str(root), route, master], env=env)


@pytest.mark.parametrize(
    ("commit_mode", "failpoint", "files"),
    [
        ("synchronous", "after-staged-write@3", FILES),
        # the third commit killed on its background thread, the next batch being written
        ("pipelined", "after-metadata-file-write@3", 3),
    ],
)
def test_sigkill_and_restart_keeps_append_and_upsert_exactly_once(
    tmp_path: Path, commit_mode: str, failpoint: str, files: int
) -> None:
    latest = prepare(tmp_path, files)
    job = kill_job(tmp_path, env={**os.environ, "STREAM_SINK_KILL_COMMIT_MODE": commit_mode})
    # a kill inside the commit protocol, then a kill at a random moment (one kill when
    # pipelined: each run starts a JVM, and the random kill does not depend on the mode)
    job.killed_at(failpoint)
    if commit_mode == "synchronous":
        job.killed_mid_stream(kill_rng(11))
    job.run_to_end()
    check_exactly_once(tmp_path, latest, files=files, spark_files=True)


V3_FILES = 3


def test_v3_killed_around_the_table_commit_keeps_upserts_exactly_once(tmp_path: Path) -> None:
    """v3 tables, the upsert stream alone: it writes deletion vectors (a key twice in a
    batch) beside equality deletes. Killed right after the table commit of its second
    batch (before the state cleanup: the restart must not commit it again), then right
    after writing the next metadata file (before the catalog swap: the restart must commit
    it once), then run to the end."""
    latest = prepare(tmp_path, V3_FILES, format_version=3)
    job = kill_job(tmp_path, env={**os.environ, "STREAM_SINK_KILL_STREAMS": "upsert"})
    job.killed_at("after-table-commit@2")
    job.killed_at("after-metadata-file-write@1")
    job.run_to_end()
    catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    upserts = catalog.load_table("db.latest")
    assert upserts.format_version == 3
    got = upserts.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["data"]) for r in got) == sorted(latest.items())
    duck = duckdb_rows(upserts.metadata_location)
    assert sorted((r["id"], r["data"]) for r in duck) == sorted(latest.items())
    assert_committed_once(iceberg_marks(upserts))
    assert [s.summary["stream-sink.max-committed-checkpoint-id"] for s in upserts.snapshots()] == [
        str(i) for i in range(V3_FILES)
    ]  # one commit per batch
    deletes = [d for task in upserts.scan().plan_files() for d in task.delete_files]
    assert any(d.is_deletion_vector for d in deletes), "no deletion vector was written"
    assert all(d.is_deletion_vector or d.equality_ids for d in deletes)


def check_exactly_once(
    root: Path,
    latest: dict[int, str],
    java: bool = False,
    files: int = FILES,
    spark_files: bool = False,
    maintained: bool = False,
) -> None:
    """Every appended row once and every key's last value, read by stream_sink and DuckDB
    (and Java Iceberg when ``java``); no batch committed twice; one job id per table.
    ``maintained``: the append table also holds in-sink maintenance's ``replace``
    snapshots (they carry no batch watermark); its appends then carry one watermark per
    batch, and pyiceberg reads it too."""
    catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(root / "warehouse"))
    events, upserts = catalog.load_table("db.events"), catalog.load_table("db.latest")
    ids = sorted(events.scan().to_arrow().column("id").to_pylist())
    assert ids == list(range(files * APPEND_ROWS))  # every row, exactly once
    if spark_files:  # the append stream's files are Spark's own (write_route="spark")
        names = [t.file_path.rsplit("/", 1)[-1] for t in events.scan().plan_files()]
        assert names and all(n.startswith("part-") for n in names)
    got = upserts.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["data"]) for r in got) == sorted(latest.items())
    assert sorted(r["id"] for r in duckdb_rows(events.metadata_location)) == ids
    if maintained:
        from readers import pyiceberg_rows

        assert sorted(r["id"] for r in pyiceberg_rows(events.metadata_location)) == ids
        appends = [s for s in events.snapshots() if s.operation == "append"]
        assert [int(s.summary[MARK]) for s in appends] == list(range(files))
    if java:
        from interop.conftest import java_available, read_with_java

        assert java_available(), "Java Iceberg launcher missing"
        java_events, java_latest = read_with_java(
            [events.metadata_location, upserts.metadata_location]
        )
        assert sorted(java_events.column("id").to_pylist()) == ids
        java_rows = zip(
            java_latest.column("id").to_pylist(),
            java_latest.column("data").to_pylist(),
            strict=True,
        )
        assert sorted(java_rows) == sorted(latest.items())
    for table in (events, upserts):
        stamped = [s for s in table.snapshots() if s.operation != "replace" or not maintained]
        assert_committed_once(int(s.summary[MARK]) for s in stamped)
        assert len({s.summary["stream-sink.job-id"] for s in stamped}) == 1


MARK = "stream-sink.max-committed-checkpoint-id"
SOURCE_FILES = 4
"""Fewer batches on the Data Source route: each commit starts a Python worker."""


@pytest.mark.timeout(1500)
@pytest.mark.skipif(not supports_data_source(), reason="format('stream_sink') needs pyspark 4")
def test_data_source_route_killed_and_restarted_exactly_once(tmp_path: Path) -> None:
    """Both streams on the Data Source route, the append one with in-sink maintenance
    every 2 commits. First a commit worker killed inside the protocol (its staged write:
    the query fails and aborts the batch). Then the commit of batch 1, its batch
    committed, killed inside its maintenance run (the compaction's metadata file
    written, not swapped in), holding the table's maintenance lease. The run to the end
    runs batch 1 again (a replay: nothing committed twice), takes the lease back at once
    (its own owner; it would otherwise wait 15 minutes for it to expire), compacts
    again, keeps ``maintenance.json`` whole and in step with the table, and leaves both
    tables exactly once. (The driver killed at a random moment on this route:
    tests/spark/test_cluster.py.)"""
    from stream_sink.io.fileio import FileIO
    from stream_sink.maintenance.lock import MaintenanceLock
    from stream_sink.metrics.maintenance_report import read_report_and_trigger, report_location

    latest = prepare(tmp_path, SOURCE_FILES)
    options = {"maintenance.commit-count": "2", "maintenance.min-input-files": "2"}
    env = {**os.environ, "STREAM_SINK_KILL_APPEND_OPTIONS": json.dumps(options)}
    job = kill_job(tmp_path, route="source", env=env)
    catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    report = report_location(str(tmp_path / "chk-db.events"), "db.events")
    io = FileIO.for_location(report)

    job.failed_at("after-staged-write@1")
    job.failed_at("before-rewrite-swap@1")
    events = catalog.load_table("db.events")
    lock = MaintenanceLock.for_table(events, owner="sink:db.events")
    assert lock.holder() == "sink:db.events"  # the killed run's lease, unexpired
    assert [s.operation for s in events.snapshots()] == ["append", "append"]  # not swapped
    killed, trigger = read_report_and_trigger(io, report)  # what batch 0's commit saved
    assert killed is not None and killed.runs == 0 and trigger is not None
    assert trigger["commits"] == 1
    assert trigger["seen_snapshot_id"] == events.snapshots()[0].snapshot_id

    job.run_to_end()
    check_exactly_once(tmp_path, latest, java=True, files=SOURCE_FILES, maintained=True)
    events = catalog.load_table("db.events")
    snapshots = events.snapshots()
    # the run again at the replay of batch 1, then after batches 2 and 3
    assert [s.operation for s in snapshots] == ["append", "append", "replace"] * 2
    assert int(events.current_snapshot().summary["total-data-files"]) == 1
    assert lock.holder() is None  # taken back, then released

    after, trigger = read_report_and_trigger(io, report)
    assert after is not None and trigger is not None
    assert (after.runs, after.failures, after.conflicts, after.skipped_locked) == (2, 0, 0, 0)
    assert after.last_error is None and not after.failing
    assert after.rewritten_data_files == 2 + 3  # batches 0 and 1; the result and 2, 3
    assert trigger["commits"] == 0
    # counted up to batch 3's commit; the run's own commit after it never counts
    assert trigger["seen_snapshot_id"] == snapshots[-2].snapshot_id


POSITIONS_FILES = 3


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("route", "version"),
    [
        ("foreach", 3),
        pytest.param(
            "source",
            2,
            marks=pytest.mark.skipif(
                not supports_data_source(), reason="format('stream_sink') needs pyspark 4"
            ),
        ),
    ],
)
def test_positions_killed_at_each_step_keep_every_snapshot_exact(
    tmp_path: Path, route: str, version: int
) -> None:
    """The upsert stream with ``deletes="positions"`` on both routes (v3: deletion
    vectors; v2: position delete files), killed once its second batch's deletes are
    resolved and written (not committed), then right after a table commit of the restart
    (before the state cleanup), then run to the end. Every snapshot holds the
    state after its batch, read the same by ours and pyiceberg (which refuses equality
    deletes); no manifest of any snapshot holds an equality delete file; no batch is
    committed twice."""
    from readers import pyiceberg_table

    from stream_sink.ops.drill.delete_files import equality_delete_snapshots

    prepare(tmp_path, POSITIONS_FILES, format_version=version)
    batches, latest = upsert_batches(POSITIONS_FILES, per_file=10, keys=KEYS, seed=3)
    env = {**os.environ, "STREAM_SINK_KILL_STREAMS": "upsert"}
    job = kill_job(tmp_path, route, env={**env, "STREAM_SINK_KILL_DELETES": "positions"})
    killed = job.killed_at if route == "foreach" else job.failed_at
    killed("after-position-deletes@2")
    # the Data Source route commits in a Python worker that counts its own hits: the
    # restart's first commit (the batch the kill aborted) is its first
    killed("after-table-commit@2" if route == "foreach" else "after-table-commit@1")
    job.run_to_end()

    catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    table = catalog.load_table("db.latest")
    theirs = pyiceberg_table(table.metadata_location)
    snapshots = table.snapshots()
    assert [int(s.summary[MARK]) for s in snapshots] == list(range(POSITIONS_FILES))
    state: dict[int, str] = {}
    for snap, batch in zip(snapshots, batches, strict=True):
        state.update((r["id"], r["data"]) for r in batch)
        ours = table.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()
        read = theirs.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()
        for rows in (ours, read):
            assert sorted((r["id"], r["data"]) for r in rows) == sorted(state.items())
    assert state == latest
    assert equality_delete_snapshots(table) == []
    assert int(snapshots[-1].summary.get("total-position-deletes", "0")) > 0
    duck = duckdb_rows(table.metadata_location)
    assert sorted((r["id"], r["data"]) for r in duck) == sorted(latest.items())
