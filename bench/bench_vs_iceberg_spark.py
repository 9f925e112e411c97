"""Append stream: IcebergSink vs Apache Iceberg's own Spark streaming writer, one session.

Run with the pyspark 3.5 interpreter (Iceberg's runtime jar is built for Spark 3.5):
``.venv-spark35/bin/python bench/bench_vs_iceberg_spark.py [files] [rows_per_file] [rounds]
[route]`` (defaults 8 x 250,000, 5 rounds, route ``auto``; ``route`` is the sink's
``write_route``: ``auto``, ``spark`` or ``arrow``; ``both`` runs the sink twice per
round, once on each route, to compare them in the same run).

The same Parquet input (``files`` files, ``maxFilesPerTrigger=2``, availableNow) goes
through (a) ``writeStream.format("iceberg").toTable("hc.db.<t>")`` and (b)
``foreachBatch`` with IcebergSink (append) into a table of the same schema, both with
Iceberg's default codec (zstd), both unpartitioned, on one local[2] session
(:mod:`iceberg_spark`). One untimed run of each side first (JVM code paths, Python
workers); then rounds interleaved, alternating which side goes first. Every final
table is read back by Spark (Iceberg's reader) and must hold ``files * rows`` rows.

Prints each run, the median of each side, the ratio iceberg / sink time (goal: at
least 1.0) and the peak resident memory of the driver and of its children (JVM and
Python workers), with the load average when the run started and ended.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_sink import SCHEMA, make_input
from iceberg_spark import iceberg_session
from streams import drain_into, jvm_peak_mib, parquet_stream

import stream_sink as ss
from stream_sink.spark import IcebergSink

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


def run_sink(spark: Any, source: Path, work: Path, name: str, route: str = "auto") -> float:
    catalog = ss.load_catalog("bench", type="hadoop", warehouse=str(work.parents[1] / "warehouse"))
    catalog.create_table(f"db.{name}", schema=TABLE_SCHEMA)
    sink = IcebergSink(
        catalog=catalog,
        table=f"db.{name}",
        checkpoint_location=str(work / "chk"),
        state_dir=str(work / "state"),
        write_route=route,
    )
    elapsed, _ = drain_into(sink, parquet_stream(spark, source, FILES_PER_TRIGGER))
    return elapsed


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
            print(f"round {r + 1} {side:13s} {elapsed:7.2f} s  {total / elapsed:12,.0f} rows/s")
    return times


def report(times: dict[str, list[float]], files: int, rows: int, jvm_mib: float) -> None:
    total = files * rows
    print(
        f"append, {files} files x {rows:,} rows, {FILES_PER_TRIGGER} files per trigger, "
        f"zstd on both sides, {len(times['iceberg'])} interleaved rounds (warm-up excluded):"
    )
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:13s} median {med:7.2f} s {total / med:12,.0f} rows/s  (runs {ts})")
    ice = times["iceberg"]
    for name, ours in times.items():
        if name == "iceberg":
            continue
        paired = statistics.median(a / b for a, b in zip(ice, ours, strict=True))
        ratio = statistics.median(ice) / statistics.median(ours)
        print(
            f"  ratio iceberg / {name} time: median {ratio:.2f}x, "
            f"median of per-round ratios {paired:.2f}x (goal >= 1.0)"
        )
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"  peak RSS (both sides, one session): driver Python {own:,.0f} MiB, "
        f"JVM {jvm_mib:,.0f} MiB"
    )


def _sink_runner(route: str) -> Runner:
    def run(spark: Any, source: Path, work: Path, name: str) -> float:
        return run_sink(spark, source, work, name, route)

    return run


def main(files: int = 8, rows: int = 250_000, rounds: int = 5, route: str = "auto") -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-vs-iceberg-"))
    print(f"load average at start: {os.getloadavg()}")
    try:
        make_input(root / "input", files, rows)
        spark = iceberg_session(str(root / "warehouse"))
        spark.sql("CREATE NAMESPACE IF NOT EXISTS hc.db")

        runners: dict[str, Runner] = {"iceberg": run_iceberg}
        for r in ("spark", "arrow") if route == "both" else (route,):
            runners["iceberg-sink" if route != "both" else f"sink-{r}"] = _sink_runner(r)
        times = run_rounds(spark, root, rounds, files * rows, runners)
        report(times, files, rows, jvm_peak_mib(spark))
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(int(a) for a in args[:3]), *args[3:4])  # type: ignore[arg-type]
