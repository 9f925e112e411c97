"""Jars the test session's Spark loads: Spark's Kafka source from the peer harness.

A module of its own (not ``conftest.py``) so that a test in any folder imports it by
its basename: a sub-folder's ``conftest.py`` would shadow the top one's name.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def spark_kafka_jars() -> str | None:
    """Spark's Kafka source (peer set ``spark-kafka``) as a ``spark.jars`` value, or None
    when Maven cannot resolve it or pyspark is older than 4 (the source is built for
    Spark 4 and Scala 2.13); the Kafka tests then skip."""
    import pyspark

    if int(pyspark.__version__.split(".")[0]) < 4:
        return None
    try:
        proc = subprocess.run(
            ["bash", str(REPO / "tests" / "peers" / "peer"), "jars", "spark-kafka"],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None
