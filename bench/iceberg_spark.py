"""A Spark session with Apache Iceberg's own Spark runtime, for benchmarks that compare
the sink with what a Spark user would pick instead (Iceberg's streaming writer,
``MERGE INTO``).

The runtime jar comes from a peer set of ``tests/peers/peer`` (resolved by Maven and
cached on first use): ``iceberg-spark-3.5`` (Apache Iceberg 1.10.2 for Spark 3.5) when the
script runs on pyspark 3.5 (``.venv-spark35/bin/python``, made by
``.ci/scripts/spark35.sh``), else ``iceberg-spark-4.1`` (Apache Iceberg 1.12.0 for Spark
4.1): :func:`use_iceberg_pyspark` then re-runs the script on that set's pyspark
(``bench/peer_spark.py``), so ``.venv/bin/python bench/<script>.py`` measures on Spark 4.1.
Either way the same session also runs the sink.

Invariants: the Hadoop catalog is named ``hc`` and its warehouse is the directory given,
so a table ``hc.db.t`` lives in ``<warehouse>/db/t`` and the sink can open the same table
with ``Catalog.hadoop(warehouse)``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from peer_spark import peer_jars, run_on_pyspark_of

SPARK_4_SET = "iceberg-spark-4.1"


def iceberg_peer_set() -> str:
    """The peer set whose runtime loads in the running pyspark."""
    import pyspark

    return "iceberg-spark-3.5" if pyspark.__version__.startswith("3.5.") else SPARK_4_SET


def use_iceberg_pyspark() -> None:
    """Stay on pyspark 3.5; on any other pyspark, run on the one of ``iceberg-spark-4.1``."""
    if iceberg_peer_set() == SPARK_4_SET:
        run_on_pyspark_of(SPARK_4_SET)
    else:  # Spark's Python workers: this interpreter, with its pyspark 3.5 and pyarrow
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def iceberg_session(warehouse: str, extra: dict[str, str] | None = None) -> Any:
    """A local[2] SparkSession with catalog ``hc`` over ``warehouse`` (call
    :func:`use_iceberg_pyspark` first)."""
    import pyspark
    from pyspark.sql import SparkSession

    peer_set = iceberg_peer_set()
    print(f"pyspark {pyspark.__version__} with Apache Iceberg's runtime of peer set {peer_set}")
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("bench-iceberg-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join(peer_jars(peer_set)))
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
