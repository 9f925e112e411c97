"""A benchmark's Spark session on a peer set's own pyspark, beside our sink.

A peer set (a folder under ``tests/peers`` with a ``pom.xml``, see ``tests/peers/peer``)
names the jars of a system ours is measured against (Apache Iceberg's Spark runtime,
Delta Lake's Spark jars) and, as property ``pyspark.version``, the pyspark they are built
for; those jars do not load in another Spark minor version. :func:`run_on_pyspark_of`
makes the running script use that pyspark: unless it already does, it replaces the
process with the same script and arguments under ``.venv-peer-SET/bin/python``
(``bench/peer_python.sh`` creates it: the set's pyspark, everything else from ``.venv``),
so ``.venv/bin/python bench/<script>.py`` is enough to run such a benchmark.

Invariants: after :func:`run_on_pyspark_of` returns, ``pyspark.__version__`` is the set's
and Spark's Python workers (``PYSPARK_PYTHON``) run the same interpreter as the driver.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "tests" / "peers"
PEER = PEERS / "peer"


def set_pyspark(peer_set: str) -> str:
    """The pyspark version peer set ``peer_set`` is built for (its pom's property)."""
    pom = (PEERS / peer_set / "pom.xml").read_text()
    found = re.search(r"<pyspark\.version>([^<]+)</pyspark\.version>", pom)
    if not found:
        raise SystemExit(f"peer set {peer_set} names no pyspark.version in its pom.xml")
    return found.group(1).strip()


def peer_jars(peer_set: str) -> list[str]:
    """The set's jars (installed by ``tests/peers/peer`` first when missing)."""
    proc = subprocess.run(
        ["bash", str(PEER), "jars", peer_set], check=True, capture_output=True, text=True
    )
    return proc.stdout.strip().split(",")


def run_on_pyspark_of(peer_set: str) -> None:
    """Return when this process runs the set's pyspark; else re-run the script under it."""
    import pyspark

    want = set_pyspark(peer_set)
    if pyspark.__version__ == want:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        return
    proc = subprocess.run(
        ["bash", str(ROOT / "bench" / "peer_python.sh"), peer_set],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    python = proc.stdout.strip()
    java = subprocess.run(
        [str(ROOT / "scripts" / "java-home.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()
    print(
        f"pyspark {pyspark.__version__} here; peer set {peer_set} needs pyspark {want}: "
        f"running again with {python}",
        flush=True,
    )
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, JAVA_HOME=java)
    env["PATH"] = f"{java}/bin:{env.get('PATH', '')}"
    os.execve(python, [python, *sys.argv], env)
