"""``format("stream_sink")`` (Spark's Python Data Source API) against ``foreachBatch``
(``IcebergSink``) on the same input, append and upsert, and the per-batch overhead of
the Data Source route.

Run: ``python bench/bench_spark_route.py [files] [rows_per_file] [tiny_batches]``
(defaults 6 x 100,000, 8). Needs pyspark >= 4.0.

1. Throughput: the same Parquet input, one file per micro-batch, through each route
   in append mode (unpartitioned table) and upsert mode (key = id mod 50,000; the
   Data Source route gets ``.repartition("key")``, as it requires; foreachBatch
   repartitions by key itself). One untimed warm-up run per route first.
2. Per-batch overhead: ``tiny_batches`` one-row batches through each route; the
   median of Spark's per-batch ``triggerExecution`` time. On the Data Source route
   every commit runs in a fresh Python worker that imports stream_sink, reopens the
   operator state and restores the committer; the import alone is timed separately
   in fresh interpreters.

Prints the times side by side, the ratios foreachBatch time / Data Source time (above 1:
the Data Source route is faster), and the peak RSS of this driver process.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import stream_sink as ss
from stream_sink.spark import IcebergSink, local_session, register

sys.path.insert(0, str(Path(__file__).resolve().parent))
from streams import drain_into, parquet_stream

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("key", pa.int64(), nullable=False),
        pa.field("category", pa.string()),
        pa.field("value", pa.float64()),
    ]
)
KEYS = 50_000


def make_input(directory: Path, files: int, rows: int) -> None:
    directory.mkdir(parents=True)
    rng = np.random.default_rng(1)
    cats = np.array([f"cat-{i:02d}" for i in range(20)], dtype=object)
    for f in range(files):
        ids = np.arange(f * rows, (f + 1) * rows, dtype=np.int64)
        table = pa.table(
            {
                "id": ids,
                "key": ids % KEYS,
                "category": cats[rng.integers(0, 20, rows)],
                "value": rng.random(rows),
            },
            schema=SCHEMA,
        )
        path = directory / f"part-{f:05d}.parquet"
        pq.write_table(table, path)
        stamp = time.time() - 10_000 + f  # Spark's file source orders files by mtime
        os.utime(path, (stamp, stamp))


def new_table(work: Path) -> Any:
    catalog = ss.load_catalog("bench", type="hadoop", warehouse=str(work / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=SCHEMA, identifier_fields=["key"])
    return catalog


def per_batch_ms(query: Any) -> list[float]:
    return [
        float(p["durationMs"]["triggerExecution"])
        for p in query.recentProgress
        if p.get("numInputRows")
    ]


def run_foreach(spark: Any, source: Path, work: Path, mode: str) -> tuple[float, list[float]]:
    catalog = new_table(work)
    extra: dict[str, Any] = {"mode": "upsert", "order_by": "id"} if mode == "upsert" else {}
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        checkpoint_location=str(work / "chk"),
        state_dir=str(work / "state"),
        **extra,
    )
    elapsed, q = drain_into(sink, parquet_stream(spark, source, 1))
    return elapsed, per_batch_ms(q)


def run_source(spark: Any, source: Path, work: Path, mode: str) -> tuple[float, list[float]]:
    new_table(work)
    df = parquet_stream(spark, source, 1)
    if mode == "upsert":
        df = df.repartition("key")
    w = (
        df.writeStream.format("stream_sink")
        .option("catalog.warehouse", str(work / "warehouse"))
        .option("table", "db.t")
        .option("state-dir", str(work / "state"))
        .option("checkpointLocation", str(work / "chk"))
    )
    if mode == "upsert":
        w = w.option("mode", "upsert").option("order-by", "id")
    started = time.perf_counter()
    q = w.trigger(availableNow=True).start()
    q.awaitTermination()
    return time.perf_counter() - started, per_batch_ms(q)


def import_cost(runs: int = 5) -> float:
    """Median seconds for a fresh interpreter to import what a commit worker imports."""
    code = "import pyspark.sql.datasource, stream_sink.spark.datasource.adapter"
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - started)
    base = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import pyspark.sql.datasource"], check=True)
        base.append(time.perf_counter() - started)
    return statistics.median(times) - statistics.median(base)


def side_by_side(title: str, spark: Any, source: Path, root: Path, mode: str, rows: int) -> None:
    results = {}
    for name, fn in (("foreachBatch", run_foreach), ("format(stream_sink)", run_source)):
        elapsed, batches = fn(spark, source, root / f"{title}-{name}", mode)
        results[name] = (elapsed, batches)
        print(
            f"  {name:20s} {elapsed:7.2f} s  {rows / elapsed:10,.0f} rows/s   "
            f"per batch median {statistics.median(batches):7.0f} ms",
            flush=True,
        )
    fb, ds = results["foreachBatch"][0], results["format(stream_sink)"][0]
    print(f"  ratio foreachBatch / format(stream_sink) time: {fb / ds:.2f}x")


def main(files: int = 6, rows: int = 100_000, tiny: int = 8) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-spark-route-"))
    try:
        make_input(root / "input", files, rows)
        make_input(root / "tiny", tiny, 1)
        spark = local_session("bench-spark-route")
        register(spark)
        for fn in (run_foreach, run_source):  # untimed warm-up of both routes
            fn(spark, root / "tiny", root / f"warmup-{fn.__name__}", "append")
        for mode in ("append", "upsert"):
            print(f"{mode}, {files} files x {rows:,} rows, one file per micro-batch:")
            side_by_side(mode, spark, root / "input", root, mode, files * rows)
        print(f"per-batch overhead, {tiny} one-row batches (append):")
        side_by_side("tiny", spark, root / "tiny", root, "append", tiny)
        print(
            f"  import of the commit worker's modules in a fresh interpreter: "
            f"{import_cost() * 1e3:.0f} ms (beyond pyspark's own)"
        )
        spark.stop()
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"peak RSS of this driver process: {own:.0f} MiB (the JVM and Python workers "
            "are not included)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
