"""On a real Spark standalone cluster (a master and two workers on 127.0.0.1, executors in
their own JVMs and Python workers): the ``format("stream_sink")`` kill test and the demo
(which kills and restarts its own job) run exactly once."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster import cluster_env, standalone_cluster
from kill_harness import kill_rng
from test_kill import SOURCE_FILES, check_exactly_once, kill_job, prepare

from stream_sink.spark.datasource.register import supports_data_source

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("spark-cluster")
    with standalone_cluster(root) as url:
        yield url, root


@pytest.mark.timeout(1500)
@pytest.mark.skipif(not supports_data_source(), reason="format('stream_sink') needs pyspark 4")
def test_data_source_route_killed_on_the_cluster(cluster: tuple[str, Path], tmp_path: Path) -> None:
    url, root = cluster
    latest = prepare(tmp_path, SOURCE_FILES)
    job = kill_job(tmp_path, route="source", master=url, env=cluster_env(root))
    job.killed_mid_stream(kill_rng(17))
    job.run_to_end()
    check_exactly_once(tmp_path, latest, java=True, files=SOURCE_FILES)


@pytest.mark.timeout(1200)
def test_demo_on_the_cluster(cluster: tuple[str, Path], tmp_path: Path) -> None:
    url, root = cluster
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "stream_sink.cli.main",
            "demo",
            "--master",
            url,
            "--rows",
            "2000",
            "--files",
            "4",
        ],
        cwd=tmp_path,
        env=cluster_env(root),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "restarting the job" in proc.stdout
    timing = proc.stdout.split("Wall time of this demo", 1)[-1]
    for phase in ("set-up", "starting Spark (2 job runs)", "streaming job", "verification"):
        assert phase in timing, proc.stdout[-3000:]
    assert "total wall time (from process start)" in timing
    apps = [p for i in range(2) for p in (root / f"work-{i}").glob("app-*")]
    assert apps, "no executor ran on the cluster's workers"
