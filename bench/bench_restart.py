"""Restart → first commit: where a restarted driver's time goes, by phase, for an
``IcebergSink(mode="upsert")`` stream, against the same restart of ``foreachBatch`` +
``MERGE INTO`` through Apache Iceberg's own Spark runtime.

Run: ``.venv/bin/python bench/bench_restart.py [--rounds 3] [--rows 20000] [--prime 3]
[--sides ours,ours-fast]`` (the sides below, comma-separated), or with ``--peer
iceberg-spark-3.5`` (re-runs itself on that peer set's pyspark, ``bench/peer_spark.py``;
sides ``ours,merge`` unless given), every driver a process of its own.

Input: Parquet files of upsert changes (``bench_upsert_merge.make_input``), one per
micro-batch (``maxFilesPerTrigger=1``, ``availableNow``), each put into the source
directory just before the drivers that are to read it start. Side ``ours-kafka``
reads the same changes as JSON from a one-partition topic of a Kafka broker on
loopback (``tests/cdc_stack.py``; ``maxOffsetsPerTrigger`` = rows per file), each
file's rows produced to it at the same moment.

Each side gets a table and a checkpoint of its own. A first driver per side commits
``prime`` batches (its start is printed too: a first start, no state yet), then each
round adds one file and starts one new driver per side (the sides' order
alternating), which restores, commits that batch and is then killed with SIGKILL
(its process group: Python, the JVM and its Python workers), as a crashed driver is.
A driver reports every phase from its process's spawn: the Python imports, the JVM
and Spark session, the sink's set-up, Spark's work up to the batch's function (query
start, checkpoint logs and source, ``latestOffset``, the offset log, planning: from
the batch's ``StreamingQueryProgress``), then inside the batch the sink's restore
(Spark's metadata and commit log, table loads, the operator state, loss checks, what
the state holds, staging sweeps; timed by wrapping those calls, with their counts)
and the batch's plan, write and commit. Sides:

- ``ours``: the sink as documented, default JVM flags;
- ``ours-fast``: the same with ``local_session(fast_start=True)`` (Spark's classes
  mapped from a class archive, ``stream_sink.spark.fast_start``; made before the
  first driver when missing, its time printed);
- ``ours-jit``: ``ours`` with the JVM flags the kill tests give their drivers (the JIT's
  quick tier only, the serial collector: ``FAST_START_JVM``);
- ``ours-kafka``: ``ours`` on the Kafka source (pyspark 4.2 or newer: the source's jars
  are of peer set ``spark-kafka``);
- ``ours-rest``: ``ours`` into SeaweedFS's Iceberg REST catalog (``weed mini`` on
  loopback, ``tests/seaweed_server.py``; the table's files on its S3);
- ``ours-cluster``: ``ours-rest`` with the driver on a Spark standalone cluster of two
  1-core workers on this machine (``tests/spark/cluster.py``, as ``scripts/cluster.sh``
  runs the sink): each driver waits for its executors, their JVMs and Python workers;
  ``ours-cluster-fast`` the same with ``fast_start=True``;
- ``merge``: the peer, ``foreachBatch`` + dedup + ``MERGE INTO`` (merge-on-read) with
  Apache Iceberg's runtime (``--peer``).

Prints each driver's spawn to first commit with the load average at its start and end,
then per side the median of each phase over the rounds, the ratio against ``ours``
(else the first side), the median steady-state batch time of the first driver (what
the JVM flags cost once running) and the peak resident memory of the drivers (Python
and JVM). At the end every table is read back by ours and must equal the expected
rows: no batch lost or doubled by the kills.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "tests")]  # tests/cdc_stack.py: Kafka

SPAWNED_AT = "BENCH_RESTART_SPAWNED_AT"
"""Environment: the ``time.time()`` at which the parent spawned the driver."""
REST_PROPS = "BENCH_RESTART_REST"
"""Environment: the REST catalog's properties as JSON (sides ``ours-rest``,
``ours-cluster``)."""
MASTER = "BENCH_RESTART_MASTER"
"""Environment: the standalone cluster's master URL (side ``ours-cluster``)."""
CLUSTER_SIDES = ("ours-cluster", "ours-cluster-fast")
REST_SIDES = ("ours-rest", *CLUSTER_SIDES)
FAST_SIDES = ("ours-fast", "ours-cluster-fast")
RESULT = "RESULT "
ROW_DDL = "id BIGINT, name STRING, amount DOUBLE, qty INT, seq BIGINT, _row_kind STRING"


def load() -> float:
    return os.getloadavg()[0]


# --- the driver (a child process) ---------------------------------------------------------


class Phases:
    """Marks from the process's spawn (wall clock, so Spark's timestamps line up) and
    inclusive times of wrapped calls."""

    def __init__(self, spawned_at: float) -> None:
        self.spawned_at = spawned_at
        self.marks: dict[str, float] = {}
        self.calls: dict[str, list[float]] = {}

    def mark(self, name: str) -> float:
        now = time.time()
        self.marks[name] = now - self.spawned_at
        return now

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        """Time every call of ``owner.attr`` (a class's method or a module's function)
        under ``label``: calls and inclusive seconds."""
        inner = getattr(owner, attr)
        acc = self.calls.setdefault(label, [0, 0.0])

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                acc[0] += 1
                acc[1] += time.perf_counter() - started

        setattr(owner, attr, timed)


def time_restore(phases: Phases, catalog: Any) -> None:
    """Wrap what the sink does before and around its first batch (no product change)."""
    import stream_sink.commit.committer as committer
    import stream_sink.spark.foreach_batch.one_table as door
    import stream_sink.spark.runtime as runtime
    from stream_sink.checkpoints import CheckpointStorage
    from stream_sink.commit import FilesCommitter, IcebergTarget
    from stream_sink.table.table import Table

    wrap = phases.wrap
    wrap(door, "iceberg_job_id", "query id (Spark's metadata file)")
    wrap(door, "open_iceberg", "committer opened and restored")
    wrap(runtime.query, "acknowledged_batch_ids", "Spark's commit log listed")
    wrap(runtime, "iceberg_committer", "committer made (target, storage)")
    wrap(FilesCommitter, "restore", "restore")
    wrap(committer, "open_committer_state", "operator state opened (RocksDB)")
    wrap(FilesCommitter, "_check_intact", "loss checks")
    wrap(FilesCommitter, "_finish_job", "what the state holds finished")
    wrap(IcebergTarget, "sweep", "staging manifests swept")
    wrap(CheckpointStorage, "sweep_temporaries", "checkpoint temporaries swept")
    wrap(CheckpointStorage, "recorded_table", "checkpoint identity read")
    wrap(IcebergTarget, "watermark", "table watermark read")
    wrap(door.OneTable, "_start_maintenance", "in-sink maintenance started")
    wrap(door.OneTable, "_plan", "batch planned (table refresh, schema check)")
    wrap(door.OneTable, "_write_changes", "batch written (Spark job, Python worker)")
    wrap(runtime.SinkRuntime, "record", "batch recorded and committed")
    wrap(type(catalog), "load_table", "table loads (catalog)")
    wrap(Table, "refresh", "table refreshes")


def side_catalog(side: str, root: Path) -> Any:
    """The side's catalog: SeaweedFS's REST catalog for ``ours-rest``, else a Hadoop
    catalog in ``root/warehouse``."""
    import stream_sink as ss

    if side in REST_SIDES:
        return ss.load_catalog("bench", type="rest", **json.loads(os.environ[REST_PROPS]))
    return ss.load_catalog("bench", type="hadoop", warehouse=str(root / "warehouse"))


def spark_conf(side: str, kafka: bool) -> dict[str, str]:
    conf: dict[str, str] = {}
    if side == "ours-jit":
        from stream_sink.ops.drill.jobs import FAST_START_JVM

        conf["spark.driver.extraJavaOptions"] = FAST_START_JVM
    if kafka:
        from cdc_stack import peer_jars

        conf["spark.jars"] = ",".join(peer_jars("spark-kafka"))
    return conf


def source_df(spark: Any, args: argparse.Namespace) -> Any:
    """The change stream: the Parquet files, or the topic's JSON messages."""
    if args.kafka is None:
        return (
            spark.readStream.schema(ROW_DDL)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(args.root / "input"))
        )
    from pyspark.sql import functions as F

    bootstrap, topic = args.kafka.split("/", 1)
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.rows)
        .load()
    )
    return raw.select(F.from_json(F.col("value").cast("string"), ROW_DDL).alias("r")).select("r.*")


def batch_function(args: argparse.Namespace, spark: Any, phases: Phases) -> Callable[..., None]:
    """The side's foreachBatch function (sink set-up timed), marking the batch's entry."""
    if args.child == "merge":
        from streams import dedup_merge_sql

        def write(df: Any, batch_id: int) -> None:
            df.createOrReplaceTempView("changes")
            df.sparkSession.sql(dedup_merge_sql(f"hc.db.{args.table}", "changes"))
    else:
        from stream_sink.spark import IcebergSink

        catalog = side_catalog(args.child, args.root)
        sink = IcebergSink(
            catalog=catalog,
            table=f"db.{args.table}",
            mode="upsert",
            row_kind_column="_row_kind",
            order_by="seq",
            checkpoint_location=str(args.work / "chk"),
            state_dir=str(args.work / "state"),
        )
        time_restore(phases, catalog)
        write = sink.foreach_batch
    phases.mark("sink set-up (catalog, table check)")
    batches: list[tuple[int, float, float]] = []

    def run(df: Any, batch_id: int) -> None:
        entered = time.time()
        write(df, batch_id)
        batches.append((batch_id, entered, time.time()))

    run.batches = batches  # type: ignore[attr-defined]
    return run


def child(args: argparse.Namespace) -> None:
    """One driver: start, run ``args.batches`` batches, report, then kill itself."""
    phases = Phases(float(os.environ[SPAWNED_AT]))
    started_load = load()
    import pyspark  # noqa: F401

    import stream_sink.spark  # noqa: F401

    phases.mark("python start and imports")
    spark = session(args)
    phases.mark("JVM and Spark session")
    run = batch_function(args, spark, phases)
    query = (
        source_df(spark, args)
        .writeStream.foreachBatch(run)
        .option("checkpointLocation", str(args.work / "chk" / "spark"))
        .trigger(availableNow=True)
        .start()
    )
    start_returned = phases.mark("query start()")
    query.awaitTermination()
    batches = run.batches  # type: ignore[attr-defined]
    if len(batches) != args.batches:
        raise SystemExit(f"{args.child}: {len(batches)} batches ran, expected {args.batches}")
    result = report(phases, query, batches, start_returned)
    result.update(load_start=started_load, load_end=load(), memory=memory(spark))
    print(RESULT + json.dumps(result), flush=True)
    os.killpg(0, signal.SIGKILL)  # as a crashed driver: Python, JVM, workers


def session(args: argparse.Namespace) -> Any:
    if args.child == "merge":
        from iceberg_spark import iceberg_session

        return iceberg_session(str(args.root / "warehouse"))
    from stream_sink.spark import local_session

    conf = spark_conf(args.child, args.kafka is not None)
    master = os.environ[MASTER] if args.child in CLUSTER_SIDES else "local[2]"
    fast = args.child in FAST_SIDES
    return local_session("bench-restart", master=master, conf=conf, fast_start=fast)


def report(
    phases: Phases, query: Any, batches: list[tuple[int, float, float]], start_returned: float
) -> dict[str, Any]:
    """The first batch's phases (Spark's from its progress event), and the later
    batches' times (steady state)."""
    progress = query.recentProgress[0]  # pyspark 3.5: a dict
    fields = (
        progress
        if isinstance(progress, dict)
        else {
            "durationMs": progress.durationMs,
            "timestamp": progress.timestamp,
        }
    )
    durations = {k: v / 1000 for k, v in fields["durationMs"].items()}
    stamp = fields["timestamp"].replace("Z", "+00:00")
    trigger = datetime.fromisoformat(stamp).timestamp()
    _, entered, committed = batches[0]
    spark_steps = {
        "Spark: checkpoint logs read, source created (before the trigger)": trigger
        - start_returned,
        "Spark: latestOffset (source offsets)": durations.get("latestOffset", 0.0),
        "Spark: offset log written (walCommit)": durations.get("walCommit", 0.0),
        "Spark: getBatch and queryPlanning": durations.get("getBatch", 0.0)
        + durations.get("queryPlanning", 0.0),
    }
    spark_steps["Spark: other, up to the batch's function"] = (
        entered - start_returned - sum(spark_steps.values())
    )
    steady = [done - entered for _, entered, done in batches[1:]]
    return {
        "marks": phases.marks,
        "spark": spark_steps,
        "calls": phases.calls,
        "in_batch": committed - entered,
        "first_commit": committed - phases.spawned_at,
        "steady": steady,
        "batch_id": batches[0][0],
    }


def memory(spark: Any) -> dict[str, float]:
    from streams import jvm_peak_mib

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"python": own, "jvm": jvm_peak_mib(spark)}


# --- the parent -----------------------------------------------------------------------------


def spawn(args: argparse.Namespace, side: str, batches: int, kafka: str | None) -> dict[str, Any]:
    """Start one driver of ``side``; its result once it killed itself."""
    work = args.root / "work" / side
    cmd = [sys.executable, __file__, "--child", side, "--root", str(args.root)]
    cmd += ["--work", str(work), "--table", side.replace("-", "_")]
    cmd += ["--batches", str(batches), "--rows", str(args.rows)]
    if kafka is not None and side == "ours-kafka":
        cmd += ["--kafka", kafka]
    env = dict(args.env, **{SPAWNED_AT: repr(time.time()), REST_PROPS: args.rest_props})
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=900, start_new_session=True
    )
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT):
            return dict(json.loads(line[len(RESULT) :]))
    sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-6000:])
    raise SystemExit(f"driver of {side} reported nothing (exit {proc.returncode})")


TREE = [
    (1, "query id (Spark's metadata file)"),
    (1, "table loads (catalog)"),
    (1, "committer opened and restored"),
    (2, "Spark's commit log listed"),
    (2, "committer made (target, storage)"),
    (2, "restore"),
    (3, "checkpoint identity read"),
    (3, "operator state opened (RocksDB)"),
    (3, "loss checks"),
    (3, "what the state holds finished"),
    (3, "staging manifests swept"),
    (3, "checkpoint temporaries swept"),
    (3, "table watermark read"),
    (1, "in-sink maintenance started"),
    (1, "batch planned (table refresh, schema check)"),
    (1, "batch written (Spark job, Python worker)"),
    (1, "batch recorded and committed"),
    (1, "table refreshes"),
]
"""The sink's timed calls, nested as they call each other (inclusive times)."""


def rows_of(result: dict[str, Any]) -> list[tuple[int, str, float, int | None]]:
    """(depth, phase, seconds, calls) in order, from the spawn to the first commit."""
    out: list[tuple[int, str, float, int | None]] = []
    last = 0.0
    for name, at in result["marks"].items():
        out.append((0, name, at - last, None))
        last = at
    for name, seconds in result["spark"].items():
        out.append((0, name, seconds, None))
    out.append((0, "the batch's function (restore, plan, write, commit)", result["in_batch"], None))
    for depth, name in TREE:
        if name in result["calls"]:
            calls, seconds = result["calls"][name]
            out.append((depth, name, seconds, int(calls)))
    out.append((0, "restart -> first commit", result["first_commit"], None))
    return out


def print_result(side: str, what: str, result: dict[str, Any]) -> None:
    print(
        f"{side} {what} (batch {result['batch_id']}): spawn -> first commit "
        f"{result['first_commit']:.2f} s; load {result['load_start']:.1f} -> "
        f"{result['load_end']:.1f}",
        flush=True,
    )


def print_medians(results: dict[str, list[dict[str, Any]]]) -> None:
    """Per phase, each side's median over the rounds, and its ratio to ours."""
    sides = list(results)
    table: dict[tuple[int, str], dict[str, list[float]]] = {}
    calls: dict[tuple[int, str], dict[str, int | None]] = {}
    for side, runs in results.items():
        for run in runs:
            for depth, name, seconds, n in rows_of(run):
                table.setdefault((depth, name), {}).setdefault(side, []).append(seconds)
                calls.setdefault((depth, name), {})[side] = n
    print(f"\nmedians over {len(results[sides[0]])} restarts (seconds; calls in brackets):")
    print(f"  {'phase':62s}" + "".join(f"{s:>18s}" for s in sides))
    for (depth, name), by_side in table.items():
        cells = []
        for side in sides:
            if side not in by_side:
                cells.append(f"{'-':>18s}")
                continue
            n = calls[(depth, name)].get(side)
            count = f" [{n}]" if n is not None else ""
            cells.append(f"{statistics.median(by_side[side]):>14.3f}{count:>4s}")
        print(f"  {'  ' * depth + name:62s}" + "".join(cells))
    base = "ours" if "ours" in results else sides[0]
    ours = [r["first_commit"] for r in results[base]]
    for side in sides:
        if side == base:
            continue
        theirs = [r["first_commit"] for r in results[side]]
        print(
            f"  ratio {side} / {base}, restart -> first commit: "
            f"{statistics.median(theirs) / statistics.median(ours):.2f}x"
        )


def print_steady(first: dict[str, dict[str, Any]]) -> None:
    for side, result in first.items():
        steady = result["steady"]
        if steady:
            print(
                f"  {side}: first driver's batches after its first: median "
                f"{statistics.median(steady):.3f} s over {len(steady)}"
            )


def check_tables(args: argparse.Namespace, sides: list[str]) -> None:
    """Every side's table equals the expected rows of the changes fed."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bench_upsert_merge import expected_rows

    changes = pa.concat_tables(
        pq.read_table(p) for p in sorted((args.root / "input").glob("*.parquet"))
    )
    want = expected_rows(changes).sort_by("id")
    for side in sides:
        os.environ[REST_PROPS] = args.rest_props
        got = (
            side_catalog(side, args.root)
            .load_table(f"db.{side.replace('-', '_')}")
            .scan()
            .to_arrow()
        )
        got = got.select(want.column_names).sort_by("id")
        if not got.equals(want.cast(got.schema)):
            raise SystemExit(f"{side}: the table does not hold the expected {want.num_rows} rows")
    print(f"  every table equals the expected rows ({want.num_rows:,} live keys): {sides}")


def create_tables(args: argparse.Namespace, sides: list[str]) -> None:
    """Each side's table, merge-on-read, keyed by ``id``."""
    import pyarrow as pa
    from bench_upsert_merge import MOR

    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("name", pa.string()),
            ("amount", pa.float64()),
            ("qty", pa.int32()),
            ("seq", pa.int64()),
        ]
    )
    os.environ[REST_PROPS] = args.rest_props
    for side in sides:
        catalog = side_catalog(side, args.root)
        if not catalog.namespace_exists("db"):
            catalog.create_namespace("db")
        name = f"db.{side.replace('-', '_')}"
        catalog.create_table(name, schema=schema, identifier_fields=["id"], properties=MOR)


def start_servers(args: argparse.Namespace, sides: list[str], stack: ExitStack) -> None:
    """What the sides need beyond local disk: SeaweedFS (S3 and its Iceberg REST catalog)
    and the standalone cluster, each on loopback and stopped with ``stack``; their
    properties in ``args.rest_props`` and ``args.env``."""
    args.rest_props, args.env = "{}", dict(os.environ)
    if not any(side in REST_SIDES for side in sides):
        return
    from seaweed_server import SeaweedServer

    server = SeaweedServer.start(args.root / "weed", table_buckets=("warehouse",))
    stack.callback(server.stop)
    args.rest_props = json.dumps(server.rest_props("warehouse"))
    if any(side in CLUSTER_SIDES for side in sides):
        cluster = _load_cluster()
        master = stack.enter_context(cluster.standalone_cluster(args.root / "spark"))
        args.env = dict(cluster.cluster_env(args.root / "spark"), **{MASTER: master})


def _load_cluster() -> Any:
    """``tests/spark/cluster.py`` (a module of the tests, not of a package)."""
    import importlib.util

    path = BENCH.parent / "tests" / "spark" / "cluster.py"
    spec = importlib.util.spec_from_file_location("spark_cluster", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_archive(sides: list[str]) -> None:
    """The class archive the fast sides map, made now when missing (timed)."""
    if not any(side in FAST_SIDES for side in sides):
        return
    from stream_sink.spark.fast_start import archive_path, java_options

    existed = archive_path().is_file()
    started = time.perf_counter()
    option = java_options()
    made = "existed" if existed else f"made in {time.perf_counter() - started:.1f} s"
    print(f"class archive for the fast sides: {option or 'none'} ({made}; load {load():.1f})")


class Feed:
    """Puts the changes into the sources one file at a time (mtimes increasing)."""

    def __init__(self, root: Path, kafka: Any | None) -> None:
        self.files = sorted((root / "all").glob("*.parquet"))
        self.input = root / "input"
        self.input.mkdir()
        self.kafka = kafka
        self.fed = 0
        self.base = time.time() - 10_000

    def add(self, count: int = 1) -> None:
        import pyarrow.parquet as pq

        for path in self.files[self.fed : self.fed + count]:
            target = self.input / path.name
            shutil.copyfile(path, target)
            stamp = self.base + self.fed
            os.utime(target, (stamp, stamp))
            if self.kafka is not None:
                rows = pq.read_table(path).to_pylist()
                self.kafka.produce(TOPIC, [(str(r["id"]), json.dumps(r)) for r in rows])
            self.fed += 1


TOPIC = "changes"


def start_kafka(root: Path, stack: ExitStack) -> Any:
    """A Kafka broker on loopback with an empty one-partition topic."""
    from cdc_stack import Kafka, peer_jars

    kafka = Kafka(root / "kafka", peer_jars("kafka-debezium"))
    stack.callback(kafka.stop)
    kafka.start()
    kafka.create_topic(TOPIC)
    return kafka


def parent(args: argparse.Namespace) -> None:
    from bench_upsert_merge import make_input

    sides = args.sides.split(",")
    import pyspark

    print(f"pyspark {pyspark.__version__}; load average at start {os.getloadavg()}", flush=True)
    args.root = Path(tempfile.mkdtemp(prefix="bench-restart-"))
    stack = ExitStack()
    try:
        make_input(args.root / "all", args.prime + args.rounds, args.rows, args.keys)
        start_servers(args, sides, stack)
        create_tables(args, sides)
        make_archive(sides)
        kafka = start_kafka(args.root, stack) if "ours-kafka" in sides else None
        where = None if kafka is None else f"{kafka.bootstrap}/{TOPIC}"
        feed = Feed(args.root, kafka)
        results: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        first: dict[str, dict[str, Any]] = {}
        feed.add(args.prime)
        for side in sides:
            first[side] = spawn(args, side, args.prime, where)
            print_result(side, "first start", first[side])
        for r in range(args.rounds):
            feed.add()
            for side in sides if r % 2 == 0 else sides[::-1]:
                result = spawn(args, side, 1, where)
                results[side].append(result)
                print_result(side, f"restart {r + 1}", result)
        print_medians(results)
        print_steady(first)
        runs = [x for rs in results.values() for x in rs] + list(first.values())
        python = max(x["memory"]["python"] for x in runs)
        jvm = max(x["memory"]["jvm"] for x in runs)
        print(f"  peak RSS of a driver: Python {python:,.0f} MiB, JVM {jvm:,.0f} MiB")
        check_tables(args, sides)
    finally:
        stack.close()
        shutil.rmtree(args.root, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=20_000, help="changes per batch")
    ap.add_argument("--keys", type=int, default=50_000)
    ap.add_argument("--prime", type=int, default=3, help="batches of each side's first driver")
    ap.add_argument("--sides", default="ours,ours-fast")
    ap.add_argument("--peer", help="a peer set: runs ours and merge on its pyspark")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--table", help=argparse.SUPPRESS)
    ap.add_argument("--batches", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--kafka", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.peer:
        from peer_spark import run_on_pyspark_of

        run_on_pyspark_of(args.peer)
        if args.sides == ap.get_default("sides"):
            args.sides = "ours,merge"
    parent(args)


if __name__ == "__main__":
    main()
