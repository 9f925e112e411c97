"""The real parts of a change-data-capture pipeline as local processes: PostgreSQL with
logical decoding, an Apache Kafka broker in KRaft mode, and Kafka Connect (standalone)
running Debezium's PostgreSQL connector, all on loopback at free ports.

The jars come from the peer set ``kafka-debezium`` (``tests/peers/peer jars``, Maven
Central through Maven, cached after the first use); PostgreSQL from ``.ci/postgres.sh``
with ``wal_level=logical``. The configuration files are ``docker/cdc/*.properties``, the
same ones ``scripts/cluster.sh`` and ``docker-compose.yml`` use; their ``${NAME}`` values
are filled in here.

Every process runs in its own process group and ``stop()`` ends that group only. Run as a
script it starts the whole stack under ``--dir``, prints ``KEY=VALUE`` lines and serves
until interrupted::

    python tests/cdc_stack.py --dir /tmp/cdc [--table public.source]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "docker" / "cdc"
PEER = REPO / "tests" / "peers" / "peer"
POSTGRES_SCRIPT = REPO / ".ci" / "postgres.sh"
LOGICAL_OPTIONS = "-c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20"
JVM_MEMORY = "-Xmx384m"
"""The heap of the Kafka broker and of Kafka Connect (docker/entrypoint.sh gives theirs
the same)."""
KAFKA_CONFIG, WORKER_CONFIG, CONNECTOR_CONFIG, SOURCE_SQL = (
    "kafka.properties",
    "connect-worker.properties",
    "debezium-postgres.properties",
    "source.sql",
)
"""The files of ``docker/cdc`` this module uses (docker-compose.yml uses the same)."""
CLUSTER_BUCKETS, CLUSTER_TABLE_BUCKETS = ("ckpt",), ("warehouse",)
"""SeaweedFS's buckets in the cluster: Spark's checkpoints, and the Iceberg table bucket."""
SPARK_WORKERS = 2
"""Spark workers of the cluster (``--cluster``; docker-compose.yml has as many)."""


class StackError(RuntimeError):
    """A part of the stack did not start or stop; the message holds its log's tail."""


def kafka_cluster_id(draw: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A random KRaft cluster id: 16 bytes in URL-safe base64, never starting with ``-``.

    Kafka's own ``Uuid.randomUuid`` draws again for an id starting with ``-``:
    ``kafka-storage format -t -abc`` reads ``-abc`` as an option and fails. One
    draw in 64 starts so.
    """
    while True:
        cluster = base64.urlsafe_b64encode(draw().bytes).decode().rstrip("=")
        if not cluster.startswith("-"):
            return cluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peer_jars(name: str) -> list[str]:
    """The jars of peer set ``name`` (installed by Maven on first use)."""
    proc = subprocess.run(
        ["bash", str(PEER), "jars", name], capture_output=True, text=True, timeout=1800
    )
    if proc.returncode != 0:
        raise StackError(f"peer set {name} cannot be installed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().split(",")


def java_home() -> str:
    return subprocess.run(
        [str(REPO / "scripts" / "java-home.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()


def render(template: str, values: Mapping[str, object]) -> str:
    """A ``docker/cdc`` file with its ``${NAME}`` values filled in (all must be given)."""
    text = (CONFIG / template).read_text()
    return string.Template(text).substitute({k: str(v) for k, v in values.items()})


def tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "<no log>"


@dataclass
class JavaProcess:
    """A JVM in its own process group, its output in ``log``."""

    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "JAVA_HOME": java_home()}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [f"{env['JAVA_HOME']}/bin/java", *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_for(self, text: str, timeout: float, since: int = 0) -> None:
        """Wait until ``text`` appears in the log after byte ``since``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_bytes()[since:].decode(errors="replace"):
                return
            if not self.running():
                raise StackError(f"{self.args[-2:]} exited:\n{tail(self.log)}")
            time.sleep(0.25)
        raise StackError(f"{self.args[-2:]}: no {text!r} after {timeout}s:\n{tail(self.log)}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.proc = None


def classpath(jars: list[str]) -> str:
    return os.pathsep.join(jars)


def log4j_config(directory: Path, level: str = "INFO") -> Path:
    """Log4j 2 settings: ``level`` and up, to standard error."""
    path = directory / f"log4j2-{level.lower()}.properties"
    path.write_text(
        f"rootLogger.level={level}\nrootLogger.appenderRef.out.ref=OUT\n"
        "appender.out.type=Console\nappender.out.name=OUT\nappender.out.target=SYSTEM_ERR\n"
        "appender.out.layout.type=PatternLayout\n"
        "appender.out.layout.pattern=[%d] %p %m (%c)%n\n"
    )
    return path


@dataclass
class Postgres:
    """PostgreSQL with ``wal_level=logical`` (Debian's package, as ``.ci/postgres.sh``).

    Its files live in a directory of their own under the temp dir (as root the server runs
    as user postgres, which must reach them: a pytest ``tmp_path`` is private to root)."""

    directory: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="stream-sink-pg-"))
    )
    url: str = ""

    def start(self) -> Postgres:
        env = {**os.environ, "POSTGRES_OPTIONS": LOGICAL_OPTIONS}
        proc = subprocess.run(
            ["bash", str(POSTGRES_SCRIPT), str(self.directory)],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
        )
        if proc.returncode != 0:
            raise StackError(f".ci/postgres.sh failed ({proc.returncode}):\n{proc.stderr}")
        self.url = proc.stdout.strip().splitlines()[-1]
        return self

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def connect(self, autocommit: bool = True):  # type: ignore[no-untyped-def]
        import psycopg

        return psycopg.connect(self.url, autocommit=autocommit)

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(POSTGRES_SCRIPT), "stop", str(self.directory)],
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(self.directory, ignore_errors=True)


@dataclass
class Kafka:
    """One Kafka broker in KRaft mode (broker and controller in one JVM)."""

    directory: Path
    jars: list[str]
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    jvm: JavaProcess | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str, level: str = "INFO") -> list[str]:
        log4j = log4j_config(self.directory, level)
        return [
            JVM_MEMORY,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath(self.jars),
            main,
            *args,
        ]

    def start(self) -> Kafka:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "server.properties"
        if not config.exists():
            config.write_text(render(KAFKA_CONFIG, self.config_values()))
            cluster = kafka_cluster_id()
            fmt = JavaProcess(
                self._java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config)),
                self.directory / "format.log",
            )
            fmt.start()
            assert fmt.proc is not None
            if fmt.proc.wait(120) != 0:
                raise StackError(f"kafka storage format failed:\n{tail(fmt.log)}")
        log = self.directory / "kafka.log"
        since = log.stat().st_size if log.exists() else 0
        self.jvm = JavaProcess(self._java("kafka.Kafka", str(config)), log)
        self.jvm.start()
        self.jvm.wait_for("Kafka Server started", 120, since)
        return self

    def config_values(self) -> dict[str, object]:
        """The ``${NAME}`` values of ``kafka.properties`` for this broker."""
        return {
            "KAFKA_HOST": "127.0.0.1",
            "KAFKA_BIND": "127.0.0.1",
            "KAFKA_PORT": self.port,
            "KAFKA_CONTROLLER_PORT": self.controller_port,
            "KAFKA_DATA": self.directory / "data",
        }

    def stop(self) -> None:
        if self.jvm is not None:
            self.jvm.stop()

    def restart(self) -> None:
        self.stop()
        self.start()

    def tool(self, main: str, *args: str, stdin: str | None = None) -> str:
        """Run one of Kafka's command-line tools (``org.apache.kafka.tools.*``)."""
        proc = subprocess.run(
            [f"{java_home()}/bin/java", *self._java(main, *args, level="WARN")],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise StackError(f"{main} {args} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        return proc.stdout

    def topics(self) -> list[str]:
        out = self.tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
                        self.bootstrap, "--list")  # fmt: skip
        return [t for t in out.split() if t]

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        """Create ``topic`` unless it exists (Debezium creates a table's topic only with
        its first event; a Spark query subscribed to a missing topic fails)."""
        self.tool(
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            self.bootstrap,
            "--create",
            "--if-not-exists",
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--replication-factor",
            "1",
        )

    def produce(self, topic: str, records: list[tuple[str, str]]) -> None:
        """Append each (key, value) as one message to ``topic`` (neither may hold a tab)."""
        self.tool(
            "org.apache.kafka.tools.ConsoleProducer",
            "--bootstrap-server",
            self.bootstrap,
            "--topic",
            topic,
            "--property",
            "parse.key=true",
            stdin="".join(f"{key}\t{value}\n" for key, value in records),
        )

    def delete_records_before(self, topic: str, offset: int, partition: int = 0) -> None:
        """Drop ``topic``'s records before ``offset``, as retention does."""
        spec = self.directory / "delete-records.json"
        spec.write_text(
            json.dumps({"partitions": [{"topic": topic, "partition": partition, "offset": offset}]})
        )
        self.tool(
            "org.apache.kafka.tools.DeleteRecordsCommand",
            "--bootstrap-server",
            self.bootstrap,
            "--offset-json-file",
            str(spec),
        )


@dataclass
class Connect:
    """Kafka Connect in standalone mode running Debezium's PostgreSQL connector."""

    directory: Path
    jars: list[str]
    kafka: Kafka
    postgres: Postgres
    tables: str = "public.source"
    topic_prefix: str = "cdc"
    schemas: bool = True
    name: str = "pg"
    flush_ms: int = 1000
    """How often Connect stores the connector's source offsets (a restart replays from
    the last stored one)."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    """Connector properties that replace the template's (e.g. ``decimal.handling.mode``)."""
    port: int = field(default_factory=free_port)
    jvm: JavaProcess | None = None

    def topic(self, table: str = "public.source") -> str:
        return f"{self.topic_prefix}.{table}"

    def start(self) -> Connect:
        self.directory.mkdir(parents=True, exist_ok=True)
        worker = self.directory / "worker.properties"
        worker.write_text(render(WORKER_CONFIG, self.worker_values()))
        connector = self.directory / "connector.properties"
        lines = [render(CONNECTOR_CONFIG, self.connector_values())]
        lines += [f"{k}={v}\n" for k, v in self.overrides.items()]  # the last one wins
        connector.write_text("".join(lines))
        log4j = log4j_config(self.directory)
        self.jvm = JavaProcess(
            [
                JVM_MEMORY,
                f"-Dlog4j2.configurationFile={log4j}",
                "-cp",
                classpath(self.jars),
                "org.apache.kafka.connect.cli.ConnectStandalone",
                str(worker),
                str(connector),
            ],
            self.directory / "connect.log",
        )
        self.jvm.start()
        self.wait_running(180)
        return self

    def worker_values(self) -> dict[str, object]:
        """The ``${NAME}`` values of ``connect-worker.properties``."""
        return {
            "KAFKA_BOOTSTRAP": self.kafka.bootstrap,
            "CONNECT_SCHEMAS_ENABLE": str(self.schemas).lower(),
            "CONNECT_DATA": self.directory,
            "CONNECT_OFFSET_FLUSH_MS": self.flush_ms,
            "CONNECT_BIND": "127.0.0.1",
            "CONNECT_PORT": self.port,
        }

    def connector_values(self) -> dict[str, object]:
        """The ``${NAME}`` values of ``debezium-postgres.properties``."""
        return {
            "CONNECTOR_NAME": self.name,
            "PG_HOST": "127.0.0.1",
            "PG_PORT": self.postgres.port,
            "PG_USER": "postgres",
            "PG_PASSWORD": "postgres",
            "PG_DATABASE": "postgres",
            "TOPIC_PREFIX": self.topic_prefix,
            "TABLE_INCLUDE": self.tables,
            "SLOT_NAME": f"stream_sink_{self.topic_prefix}",
        }

    def status(self) -> dict[str, object]:
        url = f"http://127.0.0.1:{self.port}/connectors/{self.name}/status"
        with urllib.request.urlopen(url, timeout=5) as r:
            return dict(json.load(r))

    def wait_running(self, timeout: float) -> None:
        """Wait until the connector's task runs (its snapshot may still be going on)."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self.jvm is not None
            if not self.jvm.running():
                raise StackError(f"Kafka Connect exited:\n{tail(self.jvm.log)}")
            with contextlib.suppress(OSError, ValueError):
                last = self.status()
                tasks = last.get("tasks") or []  # type: ignore[union-attr]
                states = [t.get("state") for t in tasks]  # type: ignore[union-attr]
                if "FAILED" in states:
                    raise StackError(f"Debezium's task failed: {last}")
                if states and all(s == "RUNNING" for s in states):
                    return
            time.sleep(0.5)
        assert self.jvm is not None
        raise StackError(f"connector not running after {timeout}s ({last}):\n{tail(self.jvm.log)}")

    def log_text(self) -> str:
        return (self.directory / "connect.log").read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.jvm is not None:
            self.jvm.stop(sig)


@dataclass
class Stack:
    """PostgreSQL, Kafka and Debezium (Kafka Connect), started in that order."""

    directory: Path
    schemas: bool = True
    tables: str = "public.source"
    postgres: Postgres = field(init=False)
    kafka: Kafka = field(init=False)
    connect: Connect | None = None

    def __post_init__(self) -> None:
        self.postgres = Postgres()
        self.kafka = Kafka(self.directory / "kafka", peer_jars("kafka-debezium"))

    def start(self) -> Stack:
        self.postgres.start()
        self.kafka.start()
        return self

    def start_connect(self, **options: object) -> Connect:
        """Start Debezium (once the source tables exist: the publication names them)."""
        self.connect = Connect(
            self.directory / "connect",
            self.kafka.jars,
            self.kafka,
            self.postgres,
            tables=self.tables,
            schemas=self.schemas,
            **options,  # type: ignore[arg-type]
        )
        return self.connect.start()

    def stop(self) -> None:
        for part in (self.connect, self.kafka, self.postgres):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.stop()


@contextlib.contextmanager
def running_stack(directory: Path | None = None, **options: object) -> Iterator[Stack]:
    base = directory or Path(tempfile.mkdtemp(prefix="stream-sink-cdc-"))
    stack = Stack(base, **options)  # type: ignore[arg-type]
    try:
        yield stack.start()
    finally:
        stack.stop()


def _load(name: str, path: Path) -> Any:
    """A module of the tests by path (``tests/spark/cluster.py`` is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def write_env(path: Path, values: Mapping[str, object]) -> None:
    """``KEY=VALUE`` lines, replaced atomically (readers never see half a file)."""
    part = path.with_suffix(".part")
    part.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    part.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--table", default="public.source")
    parser.add_argument("--no-schemas", action="store_true")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="also SeaweedFS (S3 and its Iceberg REST catalog) and a Spark master with two "
        "workers; create the demo's source table (docker/cdc/source.sql) when missing",
    )
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()  # a handler, not a blocked mask: children inherit masks
    serving = threading.Event()

    def on_signal(*_: object) -> None:
        stop.set()
        if not serving.is_set():  # mid-start: abort it, the with-blocks stop what started
            raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    with contextlib.ExitStack() as parts:
        stack = parts.enter_context(
            running_stack(args.dir, schemas=not args.no_schemas, tables=args.table)
        )
        values: dict[str, object] = {}
        if args.cluster:
            with stack.postgres.connect() as conn:
                conn.execute((CONFIG / SOURCE_SQL).read_text())
            seaweed = _load("seaweed_server", REPO / "tests" / "seaweed_server.py")
            weed = seaweed.SeaweedServer.start(
                args.dir / "seaweed",
                buckets=CLUSTER_BUCKETS,
                table_buckets=CLUSTER_TABLE_BUCKETS,
            )
            parts.callback(weed.stop)
            cluster = _load("spark_cluster", REPO / "tests" / "spark" / "cluster.py")
            ui = free_port()
            master = parts.enter_context(
                cluster.standalone_cluster(args.dir / "spark", SPARK_WORKERS, ui_port=ui)
            )
            values.update(
                SPARK_MASTER=master,
                SPARK_MASTER_UI=f"http://127.0.0.1:{ui}",
                CATALOG_JSON=json.dumps(
                    {"type": "rest", **weed.rest_props(CLUSTER_TABLE_BUCKETS[0])}
                ),
                S3_ENDPOINT=weed.s3_endpoint,
            )
        stack.kafka.create_topic(f"cdc.{args.table}")
        connect = stack.start_connect()
        values.update(
            POSTGRES_URL=stack.postgres.url,
            KAFKA_BOOTSTRAP=stack.kafka.bootstrap,
            CONNECT_URL=f"http://127.0.0.1:{connect.port}",
            TOPIC=connect.topic(args.table),
            PID=os.getpid(),
        )
        serving.set()
        write_env(args.dir / "env", values)
        for k, v in values.items():
            print(f"{k}={v}", flush=True)
        while not stop.wait(1):
            pass
        (args.dir / "env").unlink(missing_ok=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # a signal mid-start: what had started is stopped
        print("cdc_stack: stopped while starting", file=sys.stderr)
        sys.exit(130)
