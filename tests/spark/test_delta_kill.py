"""Delta kill tests: the streaming job is killed with SIGKILL (inside the commit protocol,
then at a random moment) and restarted from the same checkpoint location; every change
lands exactly once, and delta-rs and DuckDB's delta extension read every version the
same as the batches its ``txn`` watermark names."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from delta_readers import delta_rs_rows, duckdb_delta_versions
from streams import write_batches

from stream_sink.commit.delta_target import app_id
from stream_sink.delta import DeltaTable
from stream_sink.spark.datasource.register import supports_data_source
from stream_sink.spark.query import read_query_id

JOB = Path(__file__).with_name("delta_kill_job.py")
FILES, APPEND_ROWS, KEYS = 5, 30, 10
pytestmark = pytest.mark.spark


def prepare(root: Path, files: int = FILES) -> tuple[list[list[dict]], list[list[dict]]]:
    appends = [
        [{"id": f * APPEND_ROWS + i, "data": f"f{f}", "p": f"p{i % 3}"} for i in range(APPEND_ROWS)]
        for f in range(files)
    ]
    write_batches(root / "append-in", appends)
    rng = random.Random(5)
    upserts, seq = [], 0
    for _ in range(files):
        rows = []
        for _ in range(8):
            seq += 1
            rows.append({"id": rng.randrange(KEYS), "data": f"v{seq}", "seq": seq})
        upserts.append(rows)
    write_batches(root / "upsert-in", upserts)
    return appends, upserts


def start(
    root: Path, failpoint: str | None = None, route: str = "foreach"
) -> subprocess.Popen[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop("STREAM_SINK_FAILPOINT", None)
    if failpoint:
        env["STREAM_SINK_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, str(JOB), str(root), route],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def kill_mid_stream(proc: subprocess.Popen[str], rng: random.Random) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("batch"):
            break
    time.sleep(rng.uniform(0.0, 4.0))
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=120)


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
    rng = random.Random(int(os.environ.get("STREAM_SINK_KILL_SEED", "13")))
    proc = start(tmp_path, failpoint="after-metadata-file-write@3")
    proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL
    kill_mid_stream(start(tmp_path), rng)
    final = start(tmp_path)
    out, _ = final.communicate(timeout=600)
    assert final.returncode == 0 and "done" in out

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
        assert marks == sorted(set(marks)), f"a batch was committed twice: {marks}"
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
    proc = start(tmp_path, failpoint="after-metadata-file-write@1", route="source")
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode != 0 and "done" not in out
    log_dir = tmp_path / "lake" / "events" / "_delta_log"
    assert [p.name for p in log_dir.glob(".*.tmp")]  # the killed commit's temporary
    final = start(tmp_path, route="source")
    out, _ = final.communicate(timeout=600)
    assert final.returncode == 0 and "done" in out
    check_exactly_once(tmp_path, appends, upserts, SOURCE_FILES, "")
