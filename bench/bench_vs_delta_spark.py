"""Delta Lake: our sink against Delta Lake's own on Spark, in one session, on the same input.

Run: ``.venv/bin/python bench/bench_vs_delta_spark.py [--files 8] [--rows 250000]
[--upsert-files 10] [--upsert-rows 40000] [--keys 100000] [--rounds 5]
[--deletion-vectors on|off] [--only append|upsert] [--preload N] [--no-warm-up]``.
The script re-runs itself on the pyspark of peer set ``delta-spark-4.2`` (Delta Lake
4.4.0's ``delta-spark`` and ``delta-storage`` for Spark 4.2, which load in no other
Spark; ``bench/peer_spark.py``), the jars resolved by Maven and cached on first use
(``tests/peers/peer``).

1. Append stream: ``files`` Parquet files of ``rows`` rows (``maxFilesPerTrigger=2``,
   availableNow) through (a) ``writeStream.format("delta")`` (Delta's own streaming
   sink), (b) ``foreachBatch`` with ``DeltaSink`` (append) and (c)
   ``writeStream.format("stream_sink").option("target", "delta")``, each into a new
   table. Goal: at least 1.0x of (a) by our faster route.
2. Upsert stream: ``upsert_files`` files of ``upsert_rows`` changes (one file per
   micro-batch; ``bench_upsert_merge.py``'s input: ``id`` from ``keys`` ids, ``seq`` the
   source order, ``_row_kind`` ``+I``/``+U``/``-D``) through (a) ``foreachBatch``, the
   latest change per id (``row_number`` over ``seq``), then Delta's ``MERGE INTO``
   deleting ``-D`` ids and updating or inserting the rest, and (b) ``DeltaSink(
   mode="upsert", equality_fields=["id"], row_kind_column="_row_kind",
   order_by="seq")`` (copy-on-write) and, with deletion vectors on, (c) the same with
   ``deletes="positions"`` (the keys resolved at commit through the index of the
   table's keys, :mod:`stream_sink.delta.key_positions`). Goal: at least 2x of (a).
   ``--preload N``: every side's table starts each round as a copy of one Delta on
   Spark wrote with ``N`` live keys (ids 0 to N-1), which the changes update and
   delete (the batch time against the table's size); ``--no-warm-up`` skips the
   untimed round.

Both sides of each stream write snappy Parquet (either's default) into unpartitioned
tables on local disk; with ``--deletion-vectors on`` (the default) both upsert tables
have ``delta.enableDeletionVectors=true``, so Delta's MERGE and ours both may mark
deleted rows instead of rewriting files. The session sets ``spark.sql.shuffle.partitions`` and
``spark.databricks.delta.snapshotPartitions`` to 2 (local[2]).

One untimed warm-up of every side on the same input first; then ``rounds`` rounds, each
on fresh tables, the first side alternating. Every table is counted by Delta on Spark;
each side's last table is compared exactly, by Delta on Spark and by delta-rs, with the
rows expected (the input, or the last change per id computed with pyarrow). Prints each
run, the medians, the ratios Delta's time / ours, each final table's live data bytes
and their ratio to Delta's, the peak resident memory of the driver's Python and the JVM,
and the load average at start and end.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_sink import make_input as make_append_input
from bench_upsert_merge import expected_rows, preload_rows
from bench_upsert_merge import make_input as make_upsert_input
from peer_spark import peer_jars, run_on_pyspark_of
from streams import dedup_merge_sql, drain_into, jvm_peak_mib, parquet_stream

DELTA_SET = "delta-spark-4.2"
FILES_PER_TRIGGER = 2
DV = "delta.enableDeletionVectors"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
UPSERT_COLUMNS = ["id", "name", "amount", "qty", "seq"]
POSITIONS_SIDE = "DeltaSink(deletes='positions')"
OURS = (
    "foreachBatch DeltaSink",
    'format("stream_sink") target delta',
    "DeltaSink(mode='upsert')",
    POSITIONS_SIDE,
)
"""Our sides' names; any other side is Delta Lake's own."""
Runner = Callable[[Any, Path, Path], float]
"""(session, input directory, table directory) -> seconds; its checkpoints beside the table."""


def delta_session(driver_memory: str = "1g") -> Any:
    """A local[2] session with Delta Lake's jars of the peer set (on its pyspark)."""
    import pyspark
    from pyspark.sql import SparkSession

    jars = peer_jars(DELTA_SET)
    print(f"pyspark {pyspark.__version__} with {', '.join(Path(j).name for j in jars)}")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("bench-vs-delta-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def places(table: Path) -> tuple[str, str]:
    """Spark's checkpoint and the sink's state directory of the stream into ``table``."""
    return str(table.parent / f"{table.name}-chk"), str(table.parent / f"{table.name}-state")


BATCH_SECONDS: dict[str, list[float]] = {}
"""Per table directory, the seconds of each micro-batch of the query that wrote it."""


def timed(query: Any, started: float) -> float:
    query.awaitTermination()
    return time.perf_counter() - started


def record_batches(query: Any, table: Path) -> None:
    """Keep each micro-batch's ``triggerExecution`` time of ``query`` (the sink's work,
    its commit included, for a ``foreachBatch`` query)."""
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    BATCH_SECONDS[str(table)] = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]


# -- append ---------------------------------------------------------------------------


def append_stream(spark: Any, source: Path) -> Any:
    return parquet_stream(spark, source, FILES_PER_TRIGGER)


def append_delta(spark: Any, source: Path, table: Path) -> float:
    chk, _ = places(table)
    started = time.perf_counter()
    q = (
        append_stream(spark, source)
        .writeStream.format("delta")
        .option("checkpointLocation", chk)
        .trigger(availableNow=True)
        .start(str(table))
    )
    return timed(q, started)


def append_foreach(spark: Any, source: Path, table: Path) -> float:
    from stream_sink.spark import DeltaSink

    chk, state = places(table)
    sink = DeltaSink(path=str(table), checkpoint_location=chk, state_dir=state)
    return drain_into(sink, append_stream(spark, source))[0]


def append_datasource(spark: Any, source: Path, table: Path) -> float:
    chk, state = places(table)
    started = time.perf_counter()
    q = (
        append_stream(spark, source)
        .writeStream.format("stream_sink")
        .option("target", "delta")
        .option("state-dir", state)
        .option("checkpointLocation", chk)
        .trigger(availableNow=True)
        .start(str(table))
    )
    return timed(q, started)


# -- upsert ---------------------------------------------------------------------------


def upsert_merge(dv: bool, template: Path | None) -> Runner:
    def run(spark: Any, source: Path, table: Path) -> float:
        chk, _ = places(table)
        if template is not None:
            shutil.copytree(template, table)
        else:
            create_upsert_table(spark, table, dv)

        def merge(df: Any, batch_id: int) -> None:
            view = f"changes_{batch_id}"
            df.createOrReplaceTempView(view)
            df.sparkSession.sql(dedup_merge_sql(f"delta.`{table}`", view))
            df.sparkSession.catalog.dropTempView(view)

        started = time.perf_counter()
        q = (
            parquet_stream(spark, source, 1)
            .writeStream.foreachBatch(merge)
            .option("checkpointLocation", chk)
            .trigger(availableNow=True)
            .start()
        )
        elapsed = timed(q, started)
        record_batches(q, table)
        return elapsed

    return run


def create_upsert_table(spark: Any, table: Path, dv: bool) -> None:
    props = f"TBLPROPERTIES ('{DV}' = 'true')" if dv else ""
    spark.sql(
        f"CREATE TABLE delta.`{table}` (id BIGINT, name STRING, amount DOUBLE, qty INT, "
        f"seq BIGINT) USING delta {props}"
    )


def preloaded_template(spark: Any, root: Path, rows: pa.Table, dv: bool) -> Path:
    """A table Delta on Spark created and filled with ``rows``; each round's table of
    every side starts as a copy of it."""
    template = root / "preload-template"
    create_upsert_table(spark, template, dv)
    staged = root / "preload.parquet"
    pq.write_table(rows.select(UPSERT_COLUMNS), staged)
    spark.read.parquet(str(staged)).write.format("delta").mode("append").save(str(template))
    return template


def upsert_sink(dv: bool, template: Path | None, deletes: str = "copy-on-write") -> Runner:
    from stream_sink.spark import DeltaSink

    def run(spark: Any, source: Path, table: Path) -> float:
        chk, state = places(table)
        if template is not None:
            shutil.copytree(template, table)
        sink = DeltaSink(
            path=str(table),
            mode="upsert",
            equality_fields=["id"],
            row_kind_column="_row_kind",
            order_by="seq",
            checkpoint_location=chk,
            state_dir=state,
            configuration={DV: "true"} if dv else None,
            deletes=deletes,
        )
        elapsed, q = drain_into(sink, parquet_stream(spark, source, 1))
        record_batches(q, table)
        return elapsed

    return run


# -- rounds, checks, report -----------------------------------------------------------


def run_rounds(
    spark: Any,
    source: Path,
    work: Path,
    rounds: int,
    want: int,
    runners: dict[str, Runner],
    warm_up: bool = True,
) -> tuple[dict[str, list[float]], dict[str, Path]]:
    """A warm-up round (unless not ``warm_up``), then ``rounds`` timed ones, the first
    side alternating; every table counted by Delta on Spark. Returns the times and each
    side's last table."""
    times: dict[str, list[float]] = {side: [] for side in runners}
    last: dict[str, Path] = {}
    order = list(runners)
    for r in range(-1 if warm_up else 0, rounds):  # round -1: the untimed warm-up
        for side in order if r % 2 == 0 else order[::-1]:
            slug = re.sub(r"[^A-Za-z0-9]+", "_", side).strip("_")  # a valid sink id
            table = work / f"{slug}-{r + 1}"
            elapsed = runners[side](spark, source, table)
            rows = spark.read.format("delta").load(str(table)).count()
            if rows != want:
                raise SystemExit(f"{side}: {table} has {rows:,} rows, expected {want:,}")
            last[side] = table
            if r < 0:
                continue
            times[side].append(elapsed)
            batches = BATCH_SECONDS.get(str(table), [])
            each = f"  batches {', '.join(f'{b:.2f}' for b in batches)} s" if batches else ""
            print(
                f"  round {r + 1} {side:36s} {elapsed:7.2f} s  load {os.getloadavg()[0]:.1f}{each}",
                flush=True,
            )
    return times, last


def normalised(table: pa.Table, like: pa.Table, key: str) -> pa.Table:
    """``table``'s columns of ``like``, cast to its types, sorted by ``key``."""
    table = table.select(like.column_names).cast(like.schema)
    return table.sort_by(key)


def compare_exact(spark: Any, tables: dict[str, Path], expected: pa.Table, key: str) -> None:
    """Every table, read by Delta on Spark and by delta-rs, equals ``expected`` exactly."""
    from deltalake import DeltaTable, QueryBuilder

    like = expected.cast(pa.schema([f.with_nullable(True) for f in expected.schema]))
    like = like.sort_by(key)
    for side, path in tables.items():
        readers = {
            "Delta on Spark": spark.read.format("delta").load(str(path)).toArrow(),
            # delta-rs's query engine: unlike to_pyarrow_table, it applies deletion vectors
            "delta-rs": pa.table(
                QueryBuilder().register("t", DeltaTable(str(path))).execute("SELECT * FROM t")
            ),
        }
        for reader, got in readers.items():
            if not normalised(got, like, key).equals(like):
                raise SystemExit(f"{side}: {path} as {reader} reads it is not the expected table")
    print(
        f"  final tables equal to the expected {like.num_rows:,} rows, read by Delta on Spark "
        f"and by delta-rs: {', '.join(tables)}"
    )
    sizes = {side: table_bytes(spark, path) for side, path in tables.items()}
    baseline = next(side for side in sizes if side not in OURS)  # Delta Lake's own
    for side, path in tables.items():
        ratio = sizes[side] / max(sizes[baseline], 1)
        print(f"  {side}: {shape(spark, path)}; {sizes[side]:,} bytes, {ratio:.3f}x of {baseline}")


def table_bytes(spark: Any, path: Path) -> int:
    """The live data files' bytes, as Delta on Spark reports them."""
    return int(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["sizeInBytes"])


def shape(spark: Any, path: Path) -> str:
    """What a final table holds: versions, live files, deletion vector files written."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    versions = len(list((path / "_delta_log").glob("*.json")))
    dvs = len(list(path.rglob("deletion_vector_*.bin")))
    return (
        f"{versions} log versions, {detail['numFiles']} live files "
        f"({detail['sizeInBytes'] / 2**20:.1f} MiB), {dvs} deletion vector files written"
    )


def report(times: dict[str, list[float]], rows: int, goal: float) -> None:
    """Medians, and the ratio of the first side's (Delta's) time to each of ours."""
    for side, ts in times.items():
        med = statistics.median(ts)
        runs = ", ".join(f"{t:.2f}" for t in ts)
        print(f"  {side:36s} median {med:7.2f} s {rows / med:11,.0f} rows/s  (runs {runs})")
    baseline, *ours = times
    for side in ours:
        ratio = statistics.median(times[baseline]) / statistics.median(times[side])
        paired = statistics.median(a / b for a, b in zip(times[baseline], times[side], strict=True))
        print(
            f"  ratio {baseline} / {side} time: {ratio:.2f}x, median of per-round ratios "
            f"{paired:.2f}x (goal >= {goal:g}x)"
        )


def append_part(spark: Any, root: Path, a: argparse.Namespace) -> None:
    source = root / "append-in"
    make_append_input(source, a.files, a.rows)
    expected = pq.read_table(source)
    total = expected.num_rows
    print(
        f"append: {a.files} files x {a.rows:,} rows, {FILES_PER_TRIGGER} files per trigger, "
        f"snappy; {a.rounds} rounds after a warm-up",
        flush=True,
    )
    runners: dict[str, Runner] = {
        'writeStream.format("delta")': append_delta,
        "foreachBatch DeltaSink": append_foreach,
        'format("stream_sink") target delta': append_datasource,
    }
    times, last = run_rounds(spark, source, root / "append", a.rounds, total, runners)
    report(times, total, goal=1.0)
    compare_exact(spark, last, expected, key="id")


def upsert_part(spark: Any, root: Path, a: argparse.Namespace, dv: bool) -> None:
    source = root / "upsert-in"
    keys = max(a.keys, a.preload)
    changes = make_upsert_input(source, a.upsert_files, a.upsert_rows, keys, a.preload)
    n = changes.num_rows
    deletes = pc.sum(pc.equal(changes["_row_kind"], "-D")).as_py()
    template = None
    if a.preload:
        base = preload_rows(a.preload)
        template = preloaded_template(spark, root, base, dv)
        changes = pa.concat_tables([base, changes])
    expected = expected_rows(changes).select(UPSERT_COLUMNS)
    warm = "after a warm-up" if a.warm_up else "without a warm-up"
    print(
        f"upsert: {n:,} changes in {a.upsert_files} files (one per micro-batch) into "
        f"{a.preload:,} preloaded live keys -> {expected.num_rows:,} live keys, {deletes:,} "
        f"deletes; deletion vectors {'on' if dv else 'off'}; {a.rounds} rounds {warm}",
        flush=True,
    )
    runners = {
        "foreachBatch + dedup + Delta MERGE": upsert_merge(dv, template),
        "DeltaSink(mode='upsert')": upsert_sink(dv, template),
    }
    if dv:  # positions commit deletion vectors
        runners[POSITIONS_SIDE] = upsert_sink(dv, template, "positions")
    times, last = run_rounds(
        spark, source, root / "upsert", a.rounds, expected.num_rows, runners, a.warm_up
    )
    report(times, n, goal=2.0)
    compare_exact(spark, last, expected, key="id")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--files", type=int, default=8, help="append: input files")
    ap.add_argument("--rows", type=int, default=250_000, help="append: rows per file")
    ap.add_argument("--upsert-files", type=int, default=10, help="upsert: one per micro-batch")
    ap.add_argument("--upsert-rows", type=int, default=40_000, help="upsert: changes per file")
    ap.add_argument("--keys", type=int, default=100_000, help="upsert: distinct ids")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--deletion-vectors", choices=("on", "off"), default="on")
    ap.add_argument("--only", choices=("append", "upsert"))
    ap.add_argument("--preload", type=int, default=0, help="upsert: live keys before the changes")
    ap.add_argument("--no-warm-up", dest="warm_up", action="store_false", help="no untimed round")
    a = ap.parse_args()
    run_on_pyspark_of(DELTA_SET)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="bench-vs-delta-"))
    dv = a.deletion_vectors == "on"
    try:
        # the final tables are read whole into the driver to compare them
        spark = delta_session("4g" if a.preload >= 1_000_000 else "1g")
        from stream_sink.spark import register

        register(spark)
        if a.only in (None, "append"):
            append_part(spark, root, a)
        if a.only in (None, "upsert"):
            upsert_part(spark, root, a, dv)
        jvm = jvm_peak_mib(spark)
        spark.stop()
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"peak RSS (every side, one session): driver Python {own:,.0f} MiB, JVM {jvm:,.0f} MiB"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
