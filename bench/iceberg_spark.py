"""A pyspark 3.5 session with Apache Iceberg's own Spark runtime, for benchmarks that
compare the sink with what a Spark user would pick instead (Iceberg's streaming writer,
``MERGE INTO``).

The runtime jar is the one ``shared/tools/java-iceberg/java-iceberg setup`` installs
(Apache Iceberg 1.10.2 for Spark 3.5, with its Jackson relocated); ``$JAVA_ICEBERG_HOME``
overrides where it looks (default ``~/.cache/java-iceberg``). Run such a benchmark with
the pyspark 3.5 interpreter, ``.venv-spark35/bin/python`` (``.ci/scripts/spark35.sh``
creates it), so the same session also runs the sink.

Invariants: the Hadoop catalog is named ``hc`` and its warehouse is the directory given,
so a table ``hc.db.t`` lives in ``<warehouse>/db/t`` and the sink can open the same table
with ``Catalog.hadoop(warehouse)``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
JACKSON_JAR = "iceberg-shaded-jackson.jar"
TOOL = Path(__file__).resolve().parents[1].parent / "shared/tools/java-iceberg/java-iceberg"


def iceberg_jars() -> list[str]:
    """The runtime jars, installed first when missing (needs the java-iceberg tool)."""
    home = Path(os.environ.get("JAVA_ICEBERG_HOME", Path.home() / ".cache/java-iceberg"))
    jars = [home / "jars" / RUNTIME_JAR, home / "jars" / JACKSON_JAR]
    if not all(j.exists() for j in jars):
        if not TOOL.exists():
            raise SystemExit(f"Iceberg's Spark runtime is not installed and {TOOL} is missing")
        subprocess.run([str(TOOL), "setup"], check=True)
    return [str(j) for j in jars]


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
