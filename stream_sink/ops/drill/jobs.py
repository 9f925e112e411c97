"""The jobs a drill runs: the built-in demo pipeline, or a user's job given as entry points.

Job contract (``stream-sink drill --job pkg.mod:run --table db.t --expected pkg.mod:rows``):

- ``run(**context)`` runs in a child process (the drill's "driver"). It starts or joins a
  SparkSession itself, opens a Hadoop catalog on ``context["warehouse"]``, runs its
  streaming query into ``--table`` with ``IcebergSink(checkpoint_location=
  context["checkpoint_location"], state_dir=context["state_dir"], ...)`` until its input
  is consumed (e.g. ``trigger(availableNow=True)`` then ``awaitTermination()``), then
  returns. The drill SIGKILLs the process at any moment and calls ``run`` again, in a new
  process, with the same context: everything ``run`` creates (table, input) must be
  created only when missing, and the input must be the same each time. ``run`` may be
  called again in the same process for another scenario (another context): stop the
  queries it started before returning.
- A job writing Delta Lake with ``DeltaSink(path=os.path.join(context["work_dir"], P),
  ...)`` names its table ``--table delta:P`` (P relative to the scenario's work dir);
  the drill then reads it with stream_sink's Delta reader and DuckDB's delta extension.
- ``rows(**context)`` runs in the drill's own process once the input is consumed and
  returns the expected final table as a ``pyarrow.Table``; only its columns are compared.
  A job writing several tables names them all, ``--table db.a,db.b``: each table must
  then hold the expected rows (the routed demo, ``--target routed``, writes every change
  to each of its tables).
- ``context`` holds only strings and ints: ``work_dir`` (the scenario's own directory),
  ``warehouse``, ``checkpoint_location``, ``state_dir``, ``input_dir`` (shared, read-only
  across scenarios), ``mode`` (append | changelog | upsert), ``seed``, ``rows`` and
  ``files`` (input size hints), ``checkpoint_interval_batches``, ``namespace`` (a
  namespace of the scenario's own). Accept ``**kwargs``: keys may be added.
- With a catalog given to the drill (``stream-sink drill --catalog-type rest
  --catalog-uri URL ...``), every scenario's table lives in that catalog, in the
  scenario's ``namespace`` (the table keeps its name: ``--table db.t`` becomes
  ``<namespace>.t``); a job opens it with :func:`drill_catalog`. The catalog's
  properties (credentials among them) reach the job's processes in the environment
  (``STREAM_SINK_DRILL_CATALOG``), never in a file of the work dir.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import pyarrow as pa

from stream_sink.commit.failpoints import (
    AFTER_METADATA_FILE_WRITE,
    AFTER_POSITION_DELETES,
    BETWEEN_BATCH_COMMITS,
    FAILPOINTS,
    MULTI_TABLE_FAILPOINTS,
)
from stream_sink.demo.data import TABLE_SCHEMA, ChangeStream, generate
from stream_sink.demo.job import TABLE, DemoConfig, create_table, open_catalog, run_job, write_input
from stream_sink.exceptions import InvalidOptionError
from stream_sink.ops.drill.scenarios import KNOWN

DEMO_JOB = "stream_sink.ops.drill.jobs:run_demo"
DEMO_EXPECTED = "stream_sink.ops.drill.jobs:demo_rows"
DEMO_PREPARE = "stream_sink.ops.drill.jobs:prepare_demo"
DELTA_DEMO_JOB = "stream_sink.ops.drill.jobs:run_delta_demo"
DELTA_DEMO_PREPARE = "stream_sink.ops.drill.jobs:prepare_delta_demo"
DELTA_DEMO_TABLE = "delta:lake/orders"
ROUTED_DEMO_JOB = "stream_sink.ops.drill.jobs:run_routed_demo"
ROUTED_DEMO_PREPARE = "stream_sink.ops.drill.jobs:prepare_routed_demo"
ROUTED_TABLES = ("demo.orders_a", "demo.orders_b", "demo.orders_c")
"""The routed demo's tables: every change of the demo's stream goes to each of them."""
ROUTED_CATALOG_DB = "catalog.db"
"""The routed demo's SQL catalog: SQLite at ``<work_dir>/catalog.db``."""
ROUTED_CATALOG_NAME = "demo"
"""The routed demo's SQL catalog's name (:func:`stream_sink.demo.job.open_catalog`'s)."""
TARGETS = ("iceberg", "delta", "routed")
ONE_TABLE = "it is a step of a commit of several tables at once; --target routed drills it"
UNREACHABLE: dict[str, dict[str, str]] = {
    "iceberg": dict.fromkeys(MULTI_TABLE_FAILPOINTS, ONE_TABLE),
    "delta": {
        **dict.fromkeys(MULTI_TABLE_FAILPOINTS, ONE_TABLE),
        BETWEEN_BATCH_COMMITS: "DeltaSink commits every batch on its own",
    },
    "routed": {
        AFTER_METADATA_FILE_WRITE: "each checkpoint commits its tables in one transaction; "
        "its metadata-file step is after-tables-metadata-write",
        BETWEEN_BATCH_COMMITS: "the routed demo checkpoints every batch: one snapshot a "
        "table a checkpoint",
    },
}
"""Per built-in target, the known failpoints its job never reaches, and why: refused
by ``--failpoints`` (a failpoint a job may reach but did not is reported ``reached:
false``)."""
EQUALITY_ONLY = (
    "the demo deletes by key (Iceberg: equality deletes; Delta: copy-on-write); "
    "--deletes positions drills it"
)
"""Why the demos never reach ``after-position-deletes`` without ``--deletes positions``."""
DELETE_MODES = ("equality", "positions")
DRILL_MODES = ("append", "changelog", "upsert")
DELTA_PREFIX = "delta:"
"""``--table delta:<path>``: a Delta table at ``<work_dir>/<path>``."""
FAST_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Driver JVM flags for short drill runs: a restart spends most of its time starting."""

Context = dict[str, Any]
CATALOG_ENV = "STREAM_SINK_DRILL_CATALOG"
"""JSON ``load_catalog`` keyword arguments of the drill's catalog (absent: Hadoop catalogs
in each scenario's warehouse)."""


def drill_catalog_args() -> dict[str, Any] | None:
    """The drill's catalog (``type``, ``uri``, ``warehouse`` and properties), if given."""
    text = os.environ.get(CATALOG_ENV)
    return dict(json.loads(text)) if text else None


def drill_catalog(name: str = "drill") -> Any:
    """The drill's catalog, opened (a job's way to reach it; see the module docstring)."""
    from stream_sink.catalogs import load_catalog

    args = drill_catalog_args()
    if args is None:
        raise InvalidOptionError(f"no drill catalog: {CATALOG_ENV} is not set")
    return load_catalog(name, **args)


def scenario_table(table: str, context: Context) -> str:
    """The table a scenario writes: ``table`` itself, or in the scenario's own namespace
    when the drill has a catalog of its own."""
    if drill_catalog_args() is None:
        return table
    return f"{context['namespace']}.{table.rsplit('.', 1)[-1]}"


@dataclass(frozen=True)
class JobSpec:
    """A drilled job: entry points (``module:function``) and the table it writes."""

    job: str
    table: str
    expected: str
    prepare: str | None = None
    """Called in the drill's process before the first run of each scenario."""
    sql_catalog: bool = False
    """The tables live in the scenario's own SQL catalog (SQLite, :data:`ROUTED_CATALOG_DB`
    in its work dir, warehouse ``context["warehouse"]``); else in a Hadoop catalog there
    (or the drill's catalog)."""
    target: str | None = None
    """The built-in target this job is (None: a user's job, which may reach any known
    failpoint)."""
    deletes: str = "equality"
    """The built-in demo's ``deletes`` (a user's job sets its own); with ``positions`` the
    drill also checks that no snapshot lists an equality delete file (Delta: that no
    version rewrote a data file)
    and reads the tables with pyiceberg."""

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables the job writes (``table`` is one name or several, comma-separated)."""
        return tuple(t.strip() for t in self.table.split(",") if t.strip())

    @property
    def unreachable(self) -> dict[str, str]:
        """The known failpoints this job never reaches, each with why."""
        if not self.target:
            return {}
        never = dict(UNREACHABLE.get(self.target, {}))
        if self.deletes != "positions":
            never.setdefault(AFTER_POSITION_DELETES, EQUALITY_ONLY)
        return never

    @property
    def every_failpoint(self) -> tuple[str, ...]:
        """What ``--failpoints all`` means for this job: every known failpoint it may
        reach (a user's job: the commit protocol's; it may name the others)."""
        if self.target is None:
            return FAILPOINTS
        return tuple(f for f in KNOWN if f not in self.unreachable)

    @property
    def label(self) -> str:
        """The job as messages name it."""
        if self.target is None:
            return f"--job {self.job}"
        return f"--target {self.target} (the built-in demo)"

    @staticmethod
    def demo(target: str = "iceberg", deletes: str = "equality") -> JobSpec:
        """The built-in demo pipeline into ``demo.orders`` (Iceberg), into the Delta
        table ``lake/orders`` of each scenario's work dir (``target="delta"``), or routed
        into the three tables :data:`ROUTED_TABLES` of the scenario's SQL catalog, which
        commits each checkpoint's tables in one transaction (``target="routed"``).
        ``deletes``: ``equality`` (the sinks' defaults: Iceberg's equality deletes,
        Delta's copy-on-write) or ``positions`` (both sinks' ``deletes="positions"``)."""
        if deletes not in DELETE_MODES:
            raise InvalidOptionError(
                f"--deletes {deletes}: the demos take {' or '.join(DELETE_MODES)}; "
                "drop --deletes or choose one of them"
            )
        if target == "delta":
            return JobSpec(
                DELTA_DEMO_JOB,
                DELTA_DEMO_TABLE,
                DEMO_EXPECTED,
                DELTA_DEMO_PREPARE,
                target=target,
                deletes=deletes,
            )
        if target == "routed":
            tables = ",".join(ROUTED_TABLES)
            return JobSpec(
                ROUTED_DEMO_JOB, tables, DEMO_EXPECTED, ROUTED_DEMO_PREPARE, True, target, deletes
            )
        if target != "iceberg":
            raise InvalidOptionError(
                f"--target: expected {', '.join(TARGETS)}, got {target!r}; "
                "pass --target iceberg, delta or routed"
            )
        return JobSpec(DEMO_JOB, TABLE, DEMO_EXPECTED, DEMO_PREPARE, target=target, deletes=deletes)


def open_scenario_catalog(job: JobSpec, context: Context, name: str = "drill") -> Any:
    """The catalog the scenario's tables live in, opened (the caller closes it): the
    scenario's SQL catalog under the name the demo gives it (a SQL catalog's name keys
    its rows), else the drill's catalog or the scenario's Hadoop catalog."""
    from stream_sink.catalogs import load_catalog

    if job.sql_catalog:
        uri, warehouse = routed_catalog_uri(context), context["warehouse"]
        return load_catalog(ROUTED_CATALOG_NAME, type="sql", uri=uri, warehouse=warehouse)
    args = drill_catalog_args() or {"type": "hadoop", "warehouse": context["warehouse"]}
    return load_catalog(name, **args)


def routed_catalog_uri(context: Context) -> str:
    """The SQLite database of the scenario's own SQL catalog."""
    return "sqlite:///" + os.path.join(context["work_dir"], ROUTED_CATALOG_DB)


def resolve(ref: str, what: str) -> Callable[..., Any]:
    """The callable named ``module:function`` (InvalidOptionError when it is not one)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidOptionError(f"{what}: expected module:function, got {ref!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise InvalidOptionError(f"{what}: cannot import {module_name!r}: {e}") from e
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise InvalidOptionError(f"{what}: {ref!r} is not a callable")
    return target  # type: ignore[no-any-return]


# --- the built-in demo pipeline ------------------------------------------------------------


def _demo_config(context: Context, delta: bool = False) -> DemoConfig:
    catalog = drill_catalog_args() or {}
    if catalog and catalog.get("type") != "rest":
        raise InvalidOptionError("the drill's demo takes a REST catalog (--catalog-type rest)")
    props = {k: v for k, v in catalog.items() if k not in ("type", "uri", "warehouse")}
    return _config(context, delta, catalog, props)


def _config(
    context: Context, delta: bool, catalog: dict[str, Any], props: dict[str, str]
) -> DemoConfig:
    return DemoConfig(
        delta_path=_delta_location(context) if delta else None,
        catalog_type=catalog.get("type"),
        catalog_uri=catalog.get("uri"),
        catalog_properties=props,
        table=scenario_table(TABLE, context),
        warehouse=catalog.get("warehouse") or context["warehouse"],
        checkpoint_location=context["checkpoint_location"],
        state_dir=context["state_dir"],
        input=context["input_dir"],
        log_dir=context["work_dir"],
        mode=context["mode"],
        checkpoint_interval_batches=int(context["checkpoint_interval_batches"]),
        deletes=str(context.get("deletes", "equality")),
        spark_conf={"spark.driver.extraJavaOptions": FAST_START_JVM},
    )


def prepare_demo(**context: Any) -> None:
    """The shared input (written once per input dir) and the scenario's empty table."""
    cfg = _demo_config(context)
    _write_input_once(cfg, context)
    catalog = open_catalog(cfg)
    if not catalog.table_exists(cfg.table):
        create_table(catalog, cfg.table)


def run_demo(**context: Any) -> None:
    """The demo's streaming job (:mod:`stream_sink.demo.job`) in the context's mode."""
    run_job(_demo_config(context))


def _routed_config(context: Context) -> DemoConfig:
    """The demo routed into :data:`ROUTED_TABLES` of the scenario's SQL catalog, a
    checkpoint every batch (each checkpoint is then one snapshot a table, all of them
    in the catalog's transaction)."""
    if drill_catalog_args() is not None:
        raise InvalidOptionError(
            "the routed demo (--target routed) writes its tables to a SQL catalog of each "
            "scenario's own; drop --catalog-type rest"
        )
    base = _config(context, False, {}, {})
    return replace(
        base,
        catalog_uri=routed_catalog_uri(context),
        routed_tables=ROUTED_TABLES,
        checkpoint_interval_batches=1,
    )


def prepare_routed_demo(**context: Any) -> None:
    """The shared input and the scenario's SQL catalog with its three empty tables."""
    cfg = _routed_config(context)
    _write_input_once(cfg, context)
    catalog = open_catalog(cfg)
    try:
        for table in ROUTED_TABLES:
            if not catalog.table_exists(table):
                create_table(catalog, table)
    finally:
        catalog.close()


def run_routed_demo(**context: Any) -> None:
    """The demo's streaming job, every change routed to each table of the SQL catalog by
    one ``IcebergSink(table_column=...)``: its checkpoints commit the tables together."""
    run_job(_routed_config(context))


def _write_input_once(cfg: DemoConfig, context: Context) -> None:
    marker = os.path.join(context["input_dir"], "_drill_input.json")
    if not os.path.exists(marker):
        write_input(cfg, _stream(context))
        with open(marker, "w") as f:
            json.dump({k: context[k] for k in ("rows", "files", "seed")}, f)


def _delta_location(context: Context) -> str:
    return os.path.join(context["work_dir"], DELTA_DEMO_TABLE[len(DELTA_PREFIX) :])


def prepare_delta_demo(**context: Any) -> None:
    """The shared input and the scenario's empty Delta table (the demo's schema; with
    deletion vectors for ``--deletes positions``)."""
    from stream_sink.delta import DeltaTable

    _write_input_once(_demo_config(context, delta=True), context)
    positions = context.get("deletes") == "positions"  # DeltaSink's needs deletion vectors
    configuration = {"delta.enableDeletionVectors": "true"} if positions else None
    DeltaTable.create(
        _delta_location(context), TABLE_SCHEMA, configuration=configuration, exist_ok=True
    )


def run_delta_demo(**context: Any) -> None:
    """The demo's streaming job into the scenario's Delta table (``DeltaSink``)."""
    run_job(_demo_config(context, delta=True))


def demo_rows(**context: Any) -> pa.Table:
    """Expected table of the demo: the final orders (upsert, changelog) or every change
    row's image in input order (append: ``+I`` after, ``-U`` before, ``+U`` after, ``-D``
    before)."""
    stream = _stream(context)
    rows = list(stream.expected) if context["mode"] != "append" else change_images(stream.files)
    return pa.Table.from_pylist([_typed(r) for r in rows], schema=TABLE_SCHEMA)


def change_images(files: tuple[bytes, ...]) -> list[dict[str, Any]]:
    """The row images Debezium events carry, one per change row ``from_debezium`` emits."""
    out: list[dict[str, Any]] = []
    for payload in files:
        for line in payload.decode().splitlines():
            event = json.loads(line)
            if event["op"] in ("u", "d") and event.get("before") is not None:
                out.append(event["before"])
            if event["op"] in ("c", "r", "u"):
                out.append(event["after"])
    return out


def _stream(context: Context) -> ChangeStream:
    return generate(int(context["rows"]), int(context["files"]), int(context["seed"]))


def _typed(row: dict[str, Any]) -> dict[str, Any]:
    created = datetime.fromisoformat(row["created_at"].replace("Z", "+00:00"))
    return {**row, "created_at": created}
