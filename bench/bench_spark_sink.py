"""End-to-end rows/s of a streaming query: IcebergSink vs Spark's own parquet sink.

Run: ``python bench/bench_spark_sink.py [files] [rows_per_file] [rounds]`` (defaults
20 x 200,000, 2 rounds). The input is Parquet read with ``maxFilesPerTrigger=4``; the
same input goes through (a) ``writeStream.format("parquet")`` and (b) ``foreachBatch``
with IcebergSink in append mode into an unpartitioned table, in interleaved runs on one
local[2] session. Prints each run, the best of each, and the ratio sink / parquet (goal:
at least 0.9). Then an upsert stream (key = id mod 100,000) through IcebergSink.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import stream_sink as ss
from stream_sink.spark import IcebergSink, local_session

FILES_PER_TRIGGER = 4
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("key", pa.int64(), nullable=False),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("category", pa.string()),
    pa.field("value", pa.float64()),
    pa.field("note", pa.string()),
])  # fmt: skip


def make_input(directory: Path, files: int, rows: int) -> None:
    directory.mkdir(parents=True)
    rng = np.random.default_rng(1)
    cats = np.array([f"cat-{i:02d}" for i in range(20)], dtype=object)
    for f in range(files):
        ids = np.arange(f * rows, (f + 1) * rows, dtype=np.int64)
        table = pa.table({
            "id": ids,
            "key": ids % 100_000,
            "ts": pa.array(1_714_521_600_000_000 + ids * 1000, pa.timestamp("us", tz="UTC")),
            "category": cats[rng.integers(0, 20, rows)],
            "value": rng.random(rows),
            "note": np.char.add("note-", (ids % 977).astype(str)).astype(object),
        }, schema=SCHEMA)  # fmt: skip
        pq.write_table(table, directory / f"part-{f:05d}.parquet")


def stream(spark: Any, source: Path) -> Any:
    spark_schema = spark.read.parquet(str(source)).schema
    return (spark.readStream.schema(spark_schema)
            .option("maxFilesPerTrigger", FILES_PER_TRIGGER).parquet(str(source)))  # fmt: skip


def run_parquet(spark: Any, source: Path, work: Path) -> float:
    started = time.perf_counter()
    q = (stream(spark, source).writeStream.format("parquet").option("path", str(work / "out"))
         .option("checkpointLocation", str(work / "chk")).trigger(availableNow=True).start())
    q.awaitTermination()
    return time.perf_counter() - started


def run_sink(spark: Any, source: Path, work: Path, mode: str = "append") -> float:
    catalog = ss.load_catalog("bench", type="hadoop", warehouse=str(work / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=SCHEMA, identifier_fields=["key"])
    extra: dict[str, Any] = {"mode": "upsert", "order_by": "id"} if mode == "upsert" else {}
    sink = IcebergSink(catalog=catalog, table="db.t", checkpoint_location=str(work / "chk"),
                       state_dir=str(work / "state"), **extra)  # fmt: skip
    started = time.perf_counter()
    q = (stream(spark, source).writeStream.foreachBatch(sink.foreach_batch)
         .option("checkpointLocation", sink.spark_checkpoint_location)
         .trigger(availableNow=True).start())  # fmt: skip
    q.awaitTermination()
    sink.close()
    return time.perf_counter() - started


def main(files: int = 20, rows: int = 200_000, rounds: int = 2) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-spark-sink-"))
    total = files * rows
    try:
        make_input(root / "input", files, rows)
        spark = local_session("bench-spark-sink")
        run_parquet(spark, root / "input", root / "warmup")  # JIT, Python workers
        times: dict[str, list[float]] = {"parquet": [], "iceberg-sink": []}
        for r in range(rounds):
            for name, fn in (("parquet", run_parquet), ("iceberg-sink", run_sink)):
                work = root / f"{name}-{r}"
                elapsed = fn(spark, root / "input", work)
                times[name].append(elapsed)
                print(f"round {r + 1} {name:13s} {elapsed:7.2f} s  {total / elapsed:12,.0f} rows/s")
                shutil.rmtree(work, ignore_errors=True)
        best = {k: min(v) for k, v in times.items()}
        ratio = best["parquet"] / best["iceberg-sink"]
        print(f"append, {files} files x {rows:,} rows, {FILES_PER_TRIGGER} files per trigger:")
        for name, t in best.items():
            print(f"  {name:13s} best {t:7.2f} s  {total / t:12,.0f} rows/s")
        print(f"  ratio iceberg-sink / parquet: {ratio:.2f}x (goal >= 0.90)")
        upsert = run_sink(spark, root / "input", root / "upsert", mode="upsert")
        print(f"upsert (key = id mod 100,000): {upsert:7.2f} s  {total / upsert:12,.0f} rows/s")
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
