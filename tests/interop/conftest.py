"""Apache Iceberg Java (through Spark 3.5) as an independent reader, for interop tests.

Each call starts a JVM and Spark (20-60 s), so a test module collects every table
it writes and reads them all in one ``java_read`` call, and puts all its SQL in
one ``java_sql`` call.

Fixtures ``java_read`` and ``java_sql`` hand out these two functions:

``read_with_java(locations)``: one Arrow table per location (a table directory or a
metadata file, optionally ``@<snapshot id>``), in order, as Java Iceberg reads it
(Spark's types: uuid as text, fixed as binary, zoned timestamps in UTC).

``sql_with_java(warehouse, statements)``: runs the statements in order in one Spark
session whose Hadoop catalog ``hc`` sits on ``warehouse``; returns one entry per
statement: an Arrow table for a query (``SELECT``/``WITH``), None otherwise.
Query columns become Parquet columns: alias computed ones (``... AS b``).

The fixtures skip the test when the launcher (``../shared/tools/java-iceberg``
beside the repository, or ``$STREAM_SINK_JAVA_ICEBERG``) or bash is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

JAVA_ICEBERG = Path(
    os.environ.get("STREAM_SINK_JAVA_ICEBERG")
    or Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "tools"
    / "java-iceberg"
    / "java-iceberg"
)
JAVA_TIMEOUT_S = 900
_QUERY = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)

JavaRead = Callable[[Sequence[str]], list[pa.Table]]
JavaSql = Callable[[str, Sequence[str]], list[pa.Table | None]]


def java_available() -> bool:
    return JAVA_ICEBERG.exists() and shutil.which("bash") is not None


def _run(args: list[str]) -> str:
    proc = subprocess.run(
        ["bash", str(JAVA_ICEBERG), *args],
        capture_output=True,
        text=True,
        timeout=JAVA_TIMEOUT_S,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"java-iceberg {args[0]} failed ({proc.returncode}):\n{proc.stderr[-4000:]}\n"
            f"stdout (a '# rows=' line per location read before the failure):\n"
            f"{proc.stdout[-2000:]}"
        )
    return proc.stdout


def _read_parquet_dir(directory: Path) -> pa.Table:
    """The rows Spark wrote under ``directory`` (no part files: an empty result)."""
    parts = sorted(directory.glob("*.parquet"))
    if not parts:
        return pa.table({})
    return pa.concat_tables([pq.read_table(p) for p in parts])


def read_with_java(locations: Sequence[str]) -> list[pa.Table]:
    """Every location read by Java Iceberg in one JVM; see the module docstring."""
    if not locations:
        return []
    with tempfile.TemporaryDirectory(prefix="java-read-") as out:
        # one location writes to --out itself; give it a subdirectory like the others
        target = Path(out) / ("0" if len(locations) == 1 else "")
        _run(["read", *locations, "--out", str(target)])
        return [_read_parquet_dir(Path(out) / str(i)) for i in range(len(locations))]


def sql_with_java(warehouse: str, statements: Sequence[str]) -> list[pa.Table | None]:
    """Run ``statements`` in one Spark session over Hadoop catalog ``hc``; see the module
    docstring. Query results travel as Parquet (``INSERT OVERWRITE DIRECTORY``), so they
    keep their Spark types."""
    with tempfile.TemporaryDirectory(prefix="java-sql-") as out:
        wrapped = []
        for i, stmt in enumerate(statements):
            if _QUERY.match(stmt):
                stmt = f"INSERT OVERWRITE DIRECTORY '{Path(out) / str(i)}' USING parquet {stmt}"
            wrapped.append(stmt)
        _run(["sql", "--warehouse", warehouse, *wrapped, "SELECT 1 AS done"])
        return [
            _read_parquet_dir(Path(out) / str(i)) if _QUERY.match(stmt) else None
            for i, stmt in enumerate(statements)
        ]


@pytest.fixture(scope="session")
def java_read() -> JavaRead:
    """``read_with_java``, or a skip when Java Iceberg is not available."""
    if not java_available():
        pytest.skip(f"java-iceberg launcher not found at {JAVA_ICEBERG}")
    return read_with_java


@pytest.fixture(scope="session")
def java_sql() -> JavaSql:
    """``sql_with_java``, or a skip when Java Iceberg is not available."""
    if not java_available():
        pytest.skip(f"java-iceberg launcher not found at {JAVA_ICEBERG}")
    return sql_with_java
