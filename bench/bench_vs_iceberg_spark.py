"""Append stream: our sink vs Apache Iceberg's own Spark streaming writer, one session.

Run: ``.venv/bin/python bench/bench_vs_iceberg_spark.py [files] [rows_per_file] [rounds]
[route]`` (defaults 8 x 250,000, 5 rounds, route ``auto``). On pyspark 4.x the script
re-runs itself on the pyspark of peer set ``iceberg-spark-4.1`` (Apache Iceberg's runtime
for Spark 4.1 does not load in another Spark; ``bench/iceberg_spark.py``); with
``.venv-spark35/bin/python`` it runs on pyspark 3.5 with set ``iceberg-spark-3.5``.
``route`` is the foreachBatch sink's ``write_route``: ``auto``, ``spark`` or ``arrow``;
``both`` runs that sink twice per round, once on each route, to compare them in the
same run.

The same Parquet input (``files`` files, ``maxFilesPerTrigger=2``, availableNow) goes
through (a) ``writeStream.format("iceberg").toTable("hc.db.<t>")``, (b) ``foreachBatch``
with IcebergSink (append) and, on pyspark 4.x, (c) ``writeStream.format("stream_sink")``
(the Data Source route), each into a table of the same schema, all with Iceberg's
default codec (zstd), all unpartitioned, on one local[2] session. One untimed run of
each side first (JVM code paths, Python workers); then rounds interleaved, alternating
which side goes first. Every final table is read back by Spark (Iceberg's reader) and
must hold ``files * rows`` rows.

Prints each run (with its table's data file bytes, per column), the median of each
side, the ratio iceberg / ours time for each of our routes (goal: at least 1.0 by the
faster one) and the peak resident memory of the driver and of the JVM, with the load
average when the run started and ended.
"""

from __future__ import annotations

import os
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
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_sink import SCHEMA, make_input
from iceberg_spark import iceberg_session, use_iceberg_pyspark
from streams import drain_into, jvm_peak_mib, parquet_stream

import stream_sink as ss
from stream_sink.spark import IcebergSink, register
from stream_sink.spark.datasource.register import supports_data_source

FILES_PER_TRIGGER = 2
TABLE_SCHEMA = pa.schema([f.with_nullable(True) for f in SCHEMA])
"""Both tables all-optional: a file source's columns are nullable, and Iceberg's writer
refuses optional data for a required column."""
DDL = "id bigint, key bigint, ts timestamp, category string, value double, note string"


def run_iceberg(spark: Any, source: Path, work: Path, name: str) -> float:
    spark.sql(f"CREATE TABLE hc.db.{name} ({DDL}) USING iceberg")
    started = time.perf_counter()
    q = (
        parquet_stream(spark, source, FILES_PER_TRIGGER)
        .writeStream.format("iceberg")
        .outputMode("append")
        .option("checkpointLocation", str(work / "chk"))
        .trigger(availableNow=True)
        .toTable(f"hc.db.{name}")
    )
    q.awaitTermination()
    return time.perf_counter() - started


def new_table(work: Path, name: str) -> Any:
    """Table ``db.<name>`` of the shared warehouse (``hc.db.<name>`` to Spark)."""
    catalog = ss.load_catalog("bench", type="hadoop", warehouse=str(work.parents[1] / "warehouse"))
    catalog.create_table(f"db.{name}", schema=TABLE_SCHEMA)
    return catalog


def run_sink(spark: Any, source: Path, work: Path, name: str, route: str = "auto") -> float:
    catalog = new_table(work, name)
    sink = IcebergSink(
        catalog=catalog,
        table=f"db.{name}",
        checkpoint_location=str(work / "chk"),
        state_dir=str(work / "state"),
        write_route=route,
    )
    elapsed, _ = drain_into(sink, parquet_stream(spark, source, FILES_PER_TRIGGER))
    return elapsed


def run_datasource(spark: Any, source: Path, work: Path, name: str) -> float:
    """``writeStream.format("stream_sink")`` into a table of the same warehouse."""
    new_table(work, name)
    started = time.perf_counter()
    q = (
        parquet_stream(spark, source, FILES_PER_TRIGGER)
        .writeStream.format("stream_sink")
        .option("catalog.type", "hadoop")
        .option("catalog.warehouse", str(work.parents[1] / "warehouse"))
        .option("table", f"db.{name}")
        .option("state-dir", str(work / "state"))
        .option("checkpointLocation", str(work / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return time.perf_counter() - started


Runner = Callable[[Any, Path, Path, str], float]


def run_rounds(
    spark: Any, root: Path, rounds: int, total: int, runners: dict[str, Runner]
) -> dict[str, list[float]]:
    """Interleaved timed runs, the first side alternating; every table checked."""
    times: dict[str, list[float]] = {name: [] for name in runners}
    order = list(runners)
    for r in range(-1, rounds):  # round -1: the untimed warm-up
        for side in order if r % 2 == 0 else order[::-1]:
            name = f"{side.replace('-', '_')}_{r + 1}"
            elapsed = runners[side](spark, root / "input", root / "work" / name, name)
            rows = spark.read.format("iceberg").load(f"hc.db.{name}").count()
            if rows != total:
                raise SystemExit(f"{side}: table db.{name} has {rows:,} rows, expected {total:,}")
            if r < 0:
                continue
            times[side].append(elapsed)
            print(
                f"round {r + 1} {label(side):27s} {elapsed:7.2f} s  "
                f"{total / elapsed:12,.0f} rows/s  {data_bytes(root, name)}",
                flush=True,
            )
    return times


def data_bytes(root: Path, name: str) -> str:
    """The data files' bytes of table ``db.<name>``, then per column (footer column
    chunk sizes, with the share of chunks that have a dictionary page)."""
    paths = sorted((root / "warehouse" / "db" / name / "data").rglob("*.parquet"))
    columns: dict[str, list[int]] = {}
    for p in paths:
        md = pq.ParquetFile(p).metadata
        for g in range(md.num_row_groups):
            for c in range(md.row_group(g).num_columns):
                col = md.row_group(g).column(c)
                acc = columns.setdefault(col.path_in_schema, [0, 0, 0])
                acc[0] += col.total_compressed_size
                acc[1] += int(col.has_dictionary_page)
                acc[2] += 1
    per_column = ", ".join(f"{k} {v[0]:,} ({v[1]}/{v[2]} dict)" for k, v in columns.items())
    return f"{sum(p.stat().st_size for p in paths):,} B in {len(paths)} files: {per_column}"


def label(side: str) -> str:
    """What a side is, as a Spark user would write it."""
    if side == "iceberg":
        return 'format("iceberg")'
    if side == "stream_sink":
        return 'format("stream_sink")'
    return side.replace("foreachBatch", "foreachBatch IcebergSink")


def report(times: dict[str, list[float]], files: int, rows: int, jvm_mib: float) -> None:
    total = files * rows
    print(
        f"append, {files} files x {rows:,} rows, {FILES_PER_TRIGGER} files per trigger, "
        f"zstd on every side, {len(times['iceberg'])} interleaved rounds (warm-up excluded):"
    )
    for name, ts in times.items():
        med = statistics.median(ts)
        runs = ", ".join(f"{t:.2f}" for t in ts)
        print(f"  {label(name):27s} median {med:7.2f} s {total / med:12,.0f} rows/s  (runs {runs})")
    ice = times["iceberg"]
    for name, ours in times.items():
        if name == "iceberg":
            continue
        paired = statistics.median(a / b for a, b in zip(ice, ours, strict=True))
        ratio = statistics.median(ice) / statistics.median(ours)
        print(
            f"  ratio iceberg / {label(name)} time: median {ratio:.2f}x, "
            f"median of per-round ratios {paired:.2f}x (goal >= 1.0)"
        )
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"  peak RSS (every side, one session): driver Python {own:,.0f} MiB, "
        f"JVM {jvm_mib:,.0f} MiB"
    )


def _sink_runner(route: str) -> Runner:
    def run(spark: Any, source: Path, work: Path, name: str) -> float:
        return run_sink(spark, source, work, name, route)

    return run


def main(files: int = 8, rows: int = 250_000, rounds: int = 5, route: str = "auto") -> None:
    use_iceberg_pyspark()
    root = Path(tempfile.mkdtemp(prefix="bench-vs-iceberg-"))
    print(f"load average at start: {os.getloadavg()}")
    try:
        make_input(root / "input", files, rows)
        spark = iceberg_session(str(root / "warehouse"))
        spark.sql("CREATE NAMESPACE IF NOT EXISTS hc.db")

        runners: dict[str, Runner] = {"iceberg": run_iceberg}
        for r in ("spark", "arrow") if route == "both" else (route,):
            runners["foreachBatch" if route != "both" else f"foreachBatch-{r}"] = _sink_runner(r)
        if supports_data_source():
            register(spark)
            runners["stream_sink"] = run_datasource
        times = run_rounds(spark, root, rounds, files * rows, runners)
        report(times, files, rows, jvm_peak_mib(spark))
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(int(a) for a in args[:3]), *args[3:4])  # type: ignore[arg-type]
