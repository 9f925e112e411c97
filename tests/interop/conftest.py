"""Apache Iceberg Java (through Spark) as an independent reader, for interop tests.

Each call starts a JVM and Spark (20-60 s), so a test module collects every table
it writes and reads them all in one ``java_read`` call, and puts all its SQL in
one ``java_sql`` call.

Fixtures ``java_read`` and ``java_sql`` hand out these two functions (from
``tests/peers/readers.py``, which runs the project's own launcher ``tests/peers/peer``):

``read_with_java(locations)``: one Arrow table per location (a table directory or a
metadata file, optionally ``@<snapshot id>``), in order, as Java Iceberg reads it
(Spark's types: uuid as text, fixed as binary, zoned timestamps in UTC).

``sql_with_java(warehouse, statements)``: runs the statements in order in one Spark
session whose Hadoop catalog ``hc`` sits on ``warehouse``; returns one entry per
statement: an Arrow table for a query (``SELECT``/``WITH``), None otherwise.
Query columns become Parquet columns: alias computed ones (``... AS b``).

The fixtures skip the test only when bash is missing (the launcher installs the rest on
first use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
import pytest
from peers.readers import JAVA_ICEBERG, java_available, read_with_java, sql_with_java

__all__ = ["JAVA_ICEBERG", "java_available", "read_with_java", "sql_with_java"]

JavaRead = Callable[[Sequence[str]], list[pa.Table]]
JavaSql = Callable[[str, Sequence[str]], list[pa.Table | None]]


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
