"""The ``peer`` launcher beside this file, called from tests: Apache Iceberg's and Delta
Lake's own implementations on Spark as independent readers (and writers) of our tables.

Starting a JVM and Spark takes 20-60 s, so the calls of a whole test run share one JVM
per peer (``peer serve``: started at the first call, stopped by ``stop_servers`` at the
end of the run; ``STREAM_SINK_PEER_SERVE=0`` starts one per call instead). Still, a test
module collects every table it writes and reads them all in one call, and puts all its
SQL in one call. Results travel as Parquet, so they keep Spark's types (uuid as text,
fixed as binary, zoned timestamps in UTC).

``$STREAM_SINK_JAVA_ICEBERG`` names another launcher with the same ``read``/``sql``
interface to use for Iceberg instead."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

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
    """``launcher args...``; its stdout, or an AssertionError with its stderr. Through
    the run's peer server when the launcher is ours and no ``env`` picks another set
    (see ``_PeerServer``)."""
    serve = os.environ.get("STREAM_SINK_PEER_SERVE", "1") != "0"
    if launcher == PEER and env is None and serve:
        kind = "delta" if args[:1] == ["delta"] else "iceberg"
        code, out, err = _server(kind).call(list(args))
    else:
        proc = subprocess.run(
            ["bash", str(launcher), *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    if code != 0:
        raise AssertionError(
            f"{launcher.name} {' '.join(args[:2])} failed ({code}):\n"
            f"{err[-4000:]}\n"
            f"stdout (a '# rows=' line per table read before the failure):\n"
            f"{out[-2000:]}"
        )
    return out


class _PeerServer:
    """``peer serve KIND``: one JVM answering one command line at a time (a JSON list of
    arguments per line in, a JSON answer per line out); its own log is a temporary file,
    shown when a call fails."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.lock = threading.Lock()  # one command at a time
        self.log: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by stop)
        self.proc = subprocess.Popen(
            ["bash", str(PEER), "serve", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def call(self, args: list[str]) -> tuple[int, str, str]:
        """(exit status, stdout, stderr) of ``peer ARGS…``; a server that died or took
        longer than the timeout is stopped and the call fails."""
        with self.lock:
            return self._call(args)

    def _call(self, args: list[str]) -> tuple[int, str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(args) + "\n")
            self.proc.stdin.flush()
        except OSError:
            self.stop()
            return 1, "", f"the peer server died:\n{self._log_tail()}"
        answer: list[str] = []
        reader = threading.Thread(target=lambda: answer.append(self.proc.stdout.readline()))
        reader.daemon = True
        reader.start()
        reader.join(TIMEOUT_S)
        if not answer or not answer[0]:
            tail = self._log_tail()
            self.stop()
            return 1, "", f"the peer server gave no answer (timeout {TIMEOUT_S} s):\n{tail}"
        got = json.loads(answer[0])
        if got["rc"] == 0:
            return 0, got["stdout"], got["stderr"]
        # a failed command may leave the JVM unusable: the next call starts a fresh one
        err = f"--- peer server log\n{self._log_tail()}\n--- the command's own\n{got['stderr']}"
        self.stop()
        return got["rc"], got["stdout"], err

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:]

    def stop(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):  # end of input: the server stops and exits
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=60)
        self.log.close()


_SERVERS: dict[str, _PeerServer] = {}


def _server(kind: str) -> _PeerServer:
    server = _SERVERS.get(kind)
    if server is None or not server.alive():
        if server is not None:
            server.stop()
        server = _SERVERS[kind] = _PeerServer(kind)
    return server


def stop_servers() -> None:
    """Stop the run's peer servers (tests/conftest.py does at the end of the run)."""
    while _SERVERS:
        _SERVERS.popitem()[1].stop()


def read_parquet_dir(directory: Path) -> pa.Table:
    """The rows Spark wrote under ``directory`` (no part files: an empty result)."""
    parts = sorted(directory.glob("*.parquet"))
    if not parts:
        return pa.table({})
    return pa.concat_tables([pq.read_table(p) for p in parts])


def _read_all(
    command: Sequence[str],
    locations: Sequence[str],
    launcher: Path,
    env: dict[str, str] | None = None,
) -> list[pa.Table]:
    if not locations:
        return []
    with tempfile.TemporaryDirectory(prefix="peer-read-") as out:
        # one location writes to --out itself; give it a subdirectory like the others
        target = Path(out) / ("0" if len(locations) == 1 else "")
        run_peer([*command, *locations, "--out", str(target)], launcher, env)
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


def read_with_java(locations: Sequence[str], iceberg_set: str | None = None) -> list[pa.Table]:
    """One Arrow table per Iceberg location (a table directory or a metadata file,
    optionally ``@<snapshot id>``), in order, as Java Iceberg reads it, in one JVM: the
    run's Iceberg (set iceberg-spark-3.5, Iceberg 1.10) or, with ``iceberg_set``, that
    peer set's (``iceberg-spark-4.1``: Iceberg 1.12, a JVM of its own)."""
    env = None if iceberg_set is None else {**os.environ, "STREAM_SINK_PEER_ICEBERG": iceberg_set}
    return _read_all(["read"], locations, JAVA_ICEBERG, env)


def read_with_java_generic(locations: Sequence[str], where: Sequence[str] = ()) -> list[pa.Table]:
    """As :func:`read_with_java`, but through Apache Iceberg Java's own generic reader
    (``IcebergGenerics``) instead of Spark, every value as its Java ``toString`` text:
    it reads types Spark has none for (``timestamp_ns``, ``timestamptz_ns``). With ``where``
    (``COLUMN=VALUE`` equality filters) one column ``file`` instead: the data files Java's
    scan planning keeps for them (pruned by its own partition transforms and bounds)."""
    filters = [arg for w in where for arg in ("--where", w)]
    return _read_all(["read", "--generic", *filters], locations, JAVA_ICEBERG)


def sql_with_java(warehouse: str, statements: Sequence[str]) -> list[pa.Table | None]:
    """``statements`` run in order in one Spark session whose Iceberg Hadoop catalog
    ``hc`` sits on ``warehouse``; one entry per statement (see ``_sql``)."""
    return _sql(["sql", "--warehouse", warehouse], statements, JAVA_ICEBERG)


def sql_with_java_catalog(
    name: str, properties: dict[str, str], statements: Sequence[str], aws: bool = True
) -> list[pa.Table | None]:
    """``statements`` run in order in one Spark session of Apache Iceberg Java with
    iceberg-aws (set iceberg-aws-4.1) whose catalog ``name`` has ``properties`` (Iceberg
    catalog properties: ``type=rest``, ``uri``, ``io-impl``, ``s3.endpoint``...); one entry
    per statement (see ``_sql``). ``aws=False``: the run's served Iceberg session instead
    (no iceberg-aws; tables on local files), which answers in seconds."""
    conf = {f"spark.sql.catalog.{name}": "org.apache.iceberg.spark.SparkCatalog"}
    conf |= {f"spark.sql.catalog.{name}.{k}": v for k, v in properties.items()}
    command = ["sql"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    if not aws:
        return _sql(command, statements, PEER)
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
