"""The ``peer`` launcher beside this file, called from tests: Apache Iceberg's and Delta
Lake's own implementations on Spark as independent readers (and writers) of our tables.

Each call starts a JVM and Spark (20-60 s), so a test module collects every table it
writes and reads them all in one call, and puts all its SQL in one call. Results travel
as Parquet, so they keep Spark's types (uuid as text, fixed as binary, zoned timestamps
in UTC).

``$STREAM_SINK_JAVA_ICEBERG`` names another launcher with the same ``read``/``sql``
interface to use for Iceberg instead."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PEER = Path(__file__).resolve().parent / "peer"
JAVA_ICEBERG = Path(os.environ.get("STREAM_SINK_JAVA_ICEBERG") or PEER)
TIMEOUT_S = int(os.environ.get("STREAM_SINK_PEER_TIMEOUT_S", "900"))
_QUERY = re.compile(r"^\s*(SELECT|WITH)\b", re.IGNORECASE)


def java_available() -> bool:
    """Whether the Iceberg launcher can run here (it installs the rest on first use)."""
    return JAVA_ICEBERG.exists() and shutil.which("bash") is not None


def run_peer(args: Sequence[str], launcher: Path = PEER, env: dict[str, str] | None = None) -> str:
    """``launcher args...``; its stdout, or an AssertionError with its stderr."""
    proc = subprocess.run(
        ["bash", str(launcher), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{launcher.name} {' '.join(args[:2])} failed ({proc.returncode}):\n"
            f"{proc.stderr[-4000:]}\n"
            f"stdout (a '# rows=' line per table read before the failure):\n"
            f"{proc.stdout[-2000:]}"
        )
    return proc.stdout


def read_parquet_dir(directory: Path) -> pa.Table:
    """The rows Spark wrote under ``directory`` (no part files: an empty result)."""
    parts = sorted(directory.glob("*.parquet"))
    if not parts:
        return pa.table({})
    return pa.concat_tables([pq.read_table(p) for p in parts])


def _read_all(command: Sequence[str], locations: Sequence[str], launcher: Path) -> list[pa.Table]:
    if not locations:
        return []
    with tempfile.TemporaryDirectory(prefix="peer-read-") as out:
        # one location writes to --out itself; give it a subdirectory like the others
        target = Path(out) / ("0" if len(locations) == 1 else "")
        run_peer([*command, *locations, "--out", str(target)], launcher)
        return [read_parquet_dir(Path(out) / str(i)) for i in range(len(locations))]


def _sql(
    command: Sequence[str],
    statements: Sequence[str],
    launcher: Path,
    env: dict[str, str] | None = None,
) -> list[pa.Table | None]:
    """Run ``statements`` in one session; a query's result comes back as an Arrow table
    (through ``INSERT OVERWRITE DIRECTORY``: alias computed columns), others as None."""
    with tempfile.TemporaryDirectory(prefix="peer-sql-") as out:
        wrapped = []
        for i, stmt in enumerate(statements):
            if _QUERY.match(stmt):
                stmt = f"INSERT OVERWRITE DIRECTORY '{Path(out) / str(i)}' USING parquet {stmt}"
            wrapped.append(stmt)
        run_peer([*command, *wrapped, "SELECT 1 AS done"], launcher, env)
        return [
            read_parquet_dir(Path(out) / str(i)) if _QUERY.match(stmt) else None
            for i, stmt in enumerate(statements)
        ]


def read_with_java(locations: Sequence[str]) -> list[pa.Table]:
    """One Arrow table per Iceberg location (a table directory or a metadata file,
    optionally ``@<snapshot id>``), in order, as Java Iceberg reads it, in one JVM."""
    return _read_all(["read"], locations, JAVA_ICEBERG)


def sql_with_java(warehouse: str, statements: Sequence[str]) -> list[pa.Table | None]:
    """``statements`` run in order in one Spark session whose Iceberg Hadoop catalog
    ``hc`` sits on ``warehouse``; one entry per statement (see ``_sql``)."""
    return _sql(["sql", "--warehouse", warehouse], statements, JAVA_ICEBERG)


def sql_with_java_catalog(
    name: str, properties: dict[str, str], statements: Sequence[str]
) -> list[pa.Table | None]:
    """``statements`` run in order in one Spark session of Apache Iceberg Java with
    iceberg-aws (set iceberg-aws-4.1) whose catalog ``name`` has ``properties`` (Iceberg
    catalog properties: ``type=rest``, ``uri``, ``io-impl``, ``s3.endpoint``...); one entry
    per statement (see ``_sql``)."""
    conf = {f"spark.sql.catalog.{name}": "org.apache.iceberg.spark.SparkCatalog"}
    conf |= {f"spark.sql.catalog.{name}.{k}": v for k, v in properties.items()}
    command = ["sql"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    env = {**os.environ, "STREAM_SINK_PEER_ICEBERG": "iceberg-aws-4.1"}
    return _sql(command, statements, PEER, env)


def read_with_delta(tables: Sequence[str]) -> list[pa.Table]:
    """One Arrow table per Delta table (a directory, optionally ``@<version>``), in order,
    as Delta Lake on Spark reads it, in one JVM."""
    return _read_all(["delta", "read"], tables, PEER)


def sql_with_delta(
    statements: Sequence[str], streams: Sequence[tuple[str, str, str]] = ()
) -> list[pa.Table | None]:
    """In one Delta Lake Spark session: first each ``(source, table, checkpoint)`` of
    ``streams`` through Delta's own streaming sink (one commit per JSON file under
    ``source``, in modification time order), then ``statements`` (see ``_sql``; address
    tables as ``delta.`/path```)."""
    command = ["delta", "sql"]
    for stream in streams:
        command += ["--stream", *stream]
    return _sql(command, statements, PEER)
