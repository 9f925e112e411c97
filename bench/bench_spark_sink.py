"""End-to-end rows/s of a streaming query: IcebergSink vs Spark's own parquet sink.

Run: ``python bench/bench_spark_sink.py [files] [rows_per_file] [rounds]`` (defaults
20 x 200,000, 5 rounds). The input is Parquet read with ``maxFilesPerTrigger=4``; the
same input goes through (a) ``writeStream.format("parquet")`` and (b) ``foreachBatch``
with IcebergSink in append mode into an unpartitioned table, on one local[2] session.

Fairness: both sides write Parquet with the same codec (:data:`CODEC`, Spark's default
snappy: the table gets ``write.parquet.compression-codec``, the parquet sink the
``compression`` option; the project's own default stays Iceberg's zstd). One untimed
run of each side first starts the JVM paths and the Python workers (the parquet sink
never starts any). Rounds are interleaved, alternating which side goes first.

Prints each run, the best and the median of each side, and the ratios
parquet time / sink time (goal: at least 0.95). Then an upsert stream (key = id mod
100,000) through IcebergSink, one run.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import stream_sink as ss
from stream_sink.spark import IcebergSink, local_session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from streams import drain_into, parquet_stream

FILES_PER_TRIGGER = 4
CODEC = "snappy"
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("key", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("category", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("note", pa.string()),
    ]
)


def make_input(directory: Path, files: int, rows: int) -> None:
    directory.mkdir(parents=True)
    rng = np.random.default_rng(1)
    cats = np.array([f"cat-{i:02d}" for i in range(20)], dtype=object)
    for f in range(files):
        ids = np.arange(f * rows, (f + 1) * rows, dtype=np.int64)
        table = pa.table(
            {
                "id": ids,
                "key": ids % 100_000,
                "ts": pa.array(1_714_521_600_000_000 + ids * 1000, pa.timestamp("us", tz="UTC")),
                "category": cats[rng.integers(0, 20, rows)],
                "value": rng.random(rows),
                "note": np.char.add("note-", (ids % 977).astype(str)).astype(object),
            },
            schema=SCHEMA,
        )
        pq.write_table(table, directory / f"part-{f:05d}.parquet")


def run_parquet(spark: Any, source: Path, work: Path) -> float:
    started = time.perf_counter()
    q = (
        parquet_stream(spark, source, FILES_PER_TRIGGER)
        .writeStream.format("parquet")
        .option("path", str(work / "out"))
        .option("compression", CODEC)
        .option("checkpointLocation", str(work / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return time.perf_counter() - started


def run_sink(spark: Any, source: Path, work: Path, mode: str = "append") -> float:
    catalog = ss.load_catalog("bench", type="hadoop", warehouse=str(work / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table(
        "db.t",
        schema=SCHEMA,
        identifier_fields=["key"],
        properties={"write.parquet.compression-codec": CODEC},
    )
    extra: dict[str, Any] = {"mode": "upsert", "order_by": "id"} if mode == "upsert" else {}
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        checkpoint_location=str(work / "chk"),
        state_dir=str(work / "state"),
        **extra,
    )
    elapsed, _ = drain_into(sink, parquet_stream(spark, source, FILES_PER_TRIGGER))
    return elapsed


Runner = Callable[[Any, Path, Path], float]
RUNNERS: dict[str, Runner] = {"parquet": run_parquet, "iceberg-sink": run_sink}


def run_rounds(spark: Any, root: Path, rounds: int, total: int) -> dict[str, list[float]]:
    """Interleaved timed runs, the first side alternating between rounds."""
    for name, fn in RUNNERS.items():  # untimed: JVM code paths, Python workers
        fn(spark, root / "input", root / f"warmup-{name}")
        shutil.rmtree(root / f"warmup-{name}", ignore_errors=True)
    times: dict[str, list[float]] = {name: [] for name in RUNNERS}
    order = list(RUNNERS)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            work = root / f"{name}-{r}"
            elapsed = RUNNERS[name](spark, root / "input", work)
            times[name].append(elapsed)
            print(
                f"round {r + 1} {name:13s} {elapsed:7.2f} s  {total / elapsed:12,.0f} rows/s",
                flush=True,
            )
            shutil.rmtree(work, ignore_errors=True)
    return times


def report(times: dict[str, list[float]], files: int, rows: int) -> None:
    total = files * rows
    print(
        f"append, {files} files x {rows:,} rows, {FILES_PER_TRIGGER} files per trigger, "
        f"{CODEC} on both sides, {len(times['parquet'])} interleaved rounds:"
    )
    for name, ts in times.items():
        best, med = min(ts), statistics.median(ts)
        print(
            f"  {name:13s} best {best:7.2f} s {total / best:12,.0f} rows/s   "
            f"median {med:7.2f} s {total / med:12,.0f} rows/s"
        )
    p, s = times["parquet"], times["iceberg-sink"]
    paired = statistics.median(a / b for a, b in zip(p, s, strict=True))
    print(
        f"  ratio iceberg-sink / parquet: best {min(p) / min(s):.2f}x, "
        f"median {statistics.median(p) / statistics.median(s):.2f}x, "
        f"median of per-round ratios {paired:.2f}x (goal >= 0.95)"
    )


def main(files: int = 20, rows: int = 200_000, rounds: int = 5) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-spark-sink-"))
    print(f"load average at start: {os.getloadavg()}")
    total = files * rows
    try:
        make_input(root / "input", files, rows)
        spark = local_session("bench-spark-sink")
        report(run_rounds(spark, root, rounds, total), files, rows)
        upsert = run_sink(spark, root / "input", root / "upsert", mode="upsert")
        print(f"upsert (key = id mod 100,000): {upsert:7.2f} s  {total / upsert:12,.0f} rows/s")
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
