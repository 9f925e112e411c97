"""Kill tests: the streaming query's process is killed with SIGKILL (at a failpoint, and at
random moments mid-stream) and restarted from the same checkpoint location; the final
tables hold every row exactly once (append) and every key's last value (upsert)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_rows
from streams import write_batches

import stream_sink as ss
from stream_sink.spark.datasource.register import supports_data_source

JOB = Path(__file__).with_name("kill_job.py")
FILES, APPEND_ROWS, KEYS = 8, 40, 12
pytestmark = pytest.mark.spark


def prepare(
    root: Path, files: int = FILES, catalog: Any = None, namespace: str = "db"
) -> dict[int, str]:
    """The tables ``<namespace>.events`` and ``.latest`` (in ``catalog``, by default a
    Hadoop catalog under ``root/warehouse``) and the input files; the upsert stream's
    last value per key."""
    if catalog is None:
        catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(root / "warehouse"))
        catalog.create_namespace(namespace)
    catalog.create_table(
        f"{namespace}.events",
        schema=pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())]),
    )
    catalog.create_table(
        f"{namespace}.latest",
        schema=pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())]),
        identifier_fields=["id"],
    )
    write_batches(
        root / "append-in",
        [
            [{"id": f * APPEND_ROWS + i, "data": f"f{f}"} for i in range(APPEND_ROWS)]
            for f in range(files)
        ],
    )
    rng = random.Random(3)
    latest: dict[int, str] = {}
    upserts, seq = [], 0
    for _ in range(files):
        rows = []
        for _ in range(10):
            seq += 1
            key = rng.randrange(KEYS)
            latest[key] = f"v{seq}"
            rows.append({"id": key, "data": f"v{seq}", "seq": seq})
        upserts.append(rows)
    write_batches(root / "upsert-in", upserts)
    return latest


def start(
    root: Path,
    failpoint: str | None = None,
    route: str = "foreach",
    master: str = "local[2]",
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    env = dict(env or os.environ, PYSPARK_PYTHON=sys.executable)
    env.pop("STREAM_SINK_FAILPOINT", None)
    if failpoint:
        env["STREAM_SINK_FAILPOINT"] = failpoint
    return subprocess.Popen(
        [sys.executable, str(JOB), str(root), route, master],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def kill_mid_stream(proc: subprocess.Popen[str], rng: random.Random) -> None:
    """Wait for the first micro-batch line, then SIGKILL after a random delay."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("batch"):
            break
    time.sleep(rng.uniform(0.0, 4.0))
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=120)


def test_sigkill_and_restart_keeps_append_and_upsert_exactly_once(tmp_path: Path) -> None:
    latest = prepare(tmp_path)
    rng = random.Random(int(os.environ.get("STREAM_SINK_KILL_SEED", "11")))
    # a kill inside the commit protocol, then kills at random moments
    proc = start(tmp_path, failpoint="after-staged-write@3")
    proc.communicate(timeout=1200)
    assert proc.returncode == -signal.SIGKILL
    kill_mid_stream(start(tmp_path), rng)
    final = start(tmp_path)
    out, _ = final.communicate(timeout=1200)
    assert final.returncode == 0 and "done" in out

    check_exactly_once(tmp_path, latest, spark_files=True)


def check_exactly_once(
    root: Path,
    latest: dict[int, str],
    java: bool = False,
    files: int = FILES,
    spark_files: bool = False,
) -> None:
    """Every appended row once and every key's last value, read by stream_sink and DuckDB
    (and Java Iceberg when ``java``); no batch committed twice; one job id per table."""
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
        marks = [
            int(s.summary["stream-sink.max-committed-checkpoint-id"]) for s in table.snapshots()
        ]
        assert marks == sorted(set(marks))  # no batch committed twice
        assert len({s.summary["stream-sink.job-id"] for s in table.snapshots()}) == 1


SOURCE_FILES = 4
"""Fewer batches on the Data Source route: each commit starts a Python worker."""


@pytest.mark.timeout(1500)
@pytest.mark.skipif(not supports_data_source(), reason="format('stream_sink') needs pyspark 4")
def test_data_source_route_killed_and_restarted_exactly_once(tmp_path: Path) -> None:
    """A commit worker killed inside the protocol (the query fails and aborts the batch),
    then the driver killed mid-stream, then a run to the end."""
    latest = prepare(tmp_path, SOURCE_FILES)
    rng = random.Random(int(os.environ.get("STREAM_SINK_KILL_SEED", "13")))
    proc = start(tmp_path, failpoint="after-staged-write@1", route="source")
    out, _ = proc.communicate(timeout=1200)
    assert proc.returncode != 0 and "done" not in out
    kill_mid_stream(start(tmp_path, route="source"), rng)
    final = start(tmp_path, route="source")
    out, _ = final.communicate(timeout=1200)
    assert final.returncode == 0 and "done" in out
    check_exactly_once(tmp_path, latest, java=True, files=SOURCE_FILES)
