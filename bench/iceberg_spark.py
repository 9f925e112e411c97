"""A pyspark 3.5 session with Apache Iceberg's own Spark runtime, for benchmarks that
compare the sink with what a Spark user would pick instead (Iceberg's streaming writer,
``MERGE INTO``).

The runtime jar is peer set ``iceberg-spark-3.5`` of ``tests/peers/peer`` (Apache Iceberg
1.10.2 for Spark 3.5, resolved by Maven and cached on first use). Run such a benchmark with
the pyspark 3.5 interpreter, ``.venv-spark35/bin/python`` (``.ci/scripts/spark35.sh``
creates it), so the same session also runs the sink.

Invariants: the Hadoop catalog is named ``hc`` and its warehouse is the directory given,
so a table ``hc.db.t`` lives in ``<warehouse>/db/t`` and the sink can open the same table
with ``Catalog.hadoop(warehouse)``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

PEER = Path(__file__).resolve().parents[1] / "tests" / "peers" / "peer"
PEER_SET = "iceberg-spark-3.5"


def iceberg_jars() -> list[str]:
    """The runtime jars of the peer set, installed first when missing."""
    proc = subprocess.run(
        ["bash", str(PEER), "jars", PEER_SET], check=True, capture_output=True, text=True
    )
    return proc.stdout.strip().split(",")


def iceberg_session(warehouse: str, extra: dict[str, str] | None = None) -> Any:
    """A local[2] SparkSession (pyspark 3.5) with catalog ``hc`` over ``warehouse``."""
    import pyspark
    from pyspark.sql import SparkSession

    if not pyspark.__version__.startswith("3.5"):
        raise SystemExit(
            f"needs pyspark 3.5 (Iceberg's runtime jar is built for Spark 3.5), got "
            f"{pyspark.__version__}: run with .venv-spark35/bin/python"
        )
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("bench-iceberg-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join(iceberg_jars()))
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        )
        .config("spark.sql.catalog.hc", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.hc.type", "hadoop")
        .config("spark.sql.catalog.hc.warehouse", warehouse)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    )
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
