"""A Spark standalone cluster on this machine for the tests: one master and two workers
(1 core, 1 GiB each) on 127.0.0.1, started from pyspark's own distribution with
``scripts/spark-standalone.sh``, so executors run in their own JVMs and Python workers.

Every process runs in its own process group; :func:`standalone_cluster` stops them (and
the executors and Python workers under them) when its block ends, whatever happened.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "spark-standalone.sh"
START_TIMEOUT_S = 300
WORKER_CORES, WORKER_MEMORY = "1", "1g"
"""Each worker's share (docker-compose.yml gives its workers the same)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster_env(root: Path) -> dict[str, str]:
    """The environment of the cluster's processes, and of drivers that talk to it."""
    return dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(root / "logs"),
        SPARK_WORKER_DIR=str(root / "work"),
        PYTHON=sys.executable,
        PYSPARK_PYTHON=sys.executable,
    )


@contextmanager
def standalone_cluster(root: Path, workers: int = 2, ui_port: int = 0) -> Iterator[str]:
    """Start a master and ``workers`` workers; yield the master URL; stop them all.
    ``ui_port``: the master's web UI (and its ``/json/`` status), 0 for any free port."""
    root.mkdir(parents=True, exist_ok=True)
    env = cluster_env(root)
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def launch(name: str, *args: str) -> None:
        log = open(root / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            ["bash", str(SCRIPT), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.append(proc)

    try:
        launch("master", "master", "127.0.0.1", str(port), str(ui_port))
        _wait(lambda: _listening(port), procs, "the master to listen")
        for i in range(workers):
            launch(
                f"worker-{i}", "worker", url, WORKER_CORES, WORKER_MEMORY, str(root / f"work-{i}")
            )
        master_log = root / "master.log"
        _wait(
            lambda: master_log.read_text(errors="replace").count("Registering worker") >= workers,
            procs,
            f"{workers} workers to register",
        )
        yield url
    finally:
        _stop(procs)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait(ready: object, procs: list[subprocess.Popen[bytes]], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():  # type: ignore[operator]
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise RuntimeError(
                f"Spark standalone cluster: gave up waiting for {what} "
                f"({len(dead)} process(es) exited); see its logs"
            )
        time.sleep(0.5)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every process group (workers first), then SIGKILL what is left."""
    for p in reversed(procs):
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for p in reversed(procs):
        with suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        _signal_group(p, signal.SIGKILL)  # executors and Python workers under it
        p.wait()


def _signal_group(p: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.killpg(p.pid, sig)
