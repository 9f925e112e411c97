"""Upsert stream: ``IcebergSink(mode="upsert")`` against what a Spark user would write
instead, ``foreachBatch`` + dedup by key + ``MERGE INTO`` (merge-on-read) with Apache
Iceberg's own Spark runtime, on the same CDC changes in the same Spark session.

Run: ``.venv/bin/python bench/bench_upsert_merge.py [--files 10] [--rows 40000]
[--keys 100000] [--rounds 5]``: on pyspark 4.x the script re-runs itself on the pyspark
of peer set ``iceberg-spark-4.1`` (Apache Iceberg's runtime for Spark 4.1 loads in no
other Spark; see ``bench/iceberg_spark.py``); with ``.venv-spark35/bin/python`` it runs
on pyspark 3.5 with set ``iceberg-spark-3.5``.

Input: ``files`` Parquet files of ``rows`` changes each (one file per micro-batch):
``id`` drawn from ``keys`` ids, a payload, ``seq`` (the source order, increasing) and
``_row_kind`` (``+I`` for a new id, else 85% ``+U`` and 15% ``-D``).

- (a) MERGE: per batch, the latest change of each id (``row_number`` over ``seq``
  descending), then ``MERGE INTO`` deleting ``-D`` ids and updating or inserting the
  rest; the table has ``write.{delete,update,merge}.mode=merge-on-read``.
- (b) ours: ``IcebergSink(mode="upsert", row_kind_column="_row_kind", order_by="seq")``.
  Each batch is one small file, read in one partition, so the sink orders it inside
  its one task (``stream_sink.spark.foreach_batch.single_task``).
- (c) ours, shuffled: the same sink forced onto the route it takes for batches read in
  several partitions (shuffle by key, Spark's sort), to show what (b) saves.

One untimed warm-up round of both first; then ``rounds`` interleaved rounds, each on a
fresh table; medians, the ratio MERGE time / ours (above 1: ours is faster), the peak
RSS of the driver, and the final tables of both compared exactly with each other and
with the expected rows (computed with pyarrow), all read by Iceberg's Spark reader.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from iceberg_spark import iceberg_session, use_iceberg_pyspark
from streams import dedup_merge_sql, drain_into, jvm_peak_mib, parquet_stream

import stream_sink as ss
import stream_sink.spark.foreach_batch.one_table as sink_module
from stream_sink.spark import IcebergSink

COLUMNS = "id BIGINT NOT NULL, name STRING, amount DOUBLE, qty INT, seq BIGINT"
MOR = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def make_input(directory: Path, files: int, rows: int, keys: int) -> pa.Table:
    """Write the change files; return every change (for the expected result)."""
    directory.mkdir(parents=True)
    rng = np.random.default_rng(16)
    seen = np.zeros(keys, dtype=bool)
    parts = []
    for f in range(files):
        ids = rng.integers(0, keys, rows)
        # a key's first change in the stream is an insert; later ones update or delete
        first = ~seen[ids]
        _, at = np.unique(ids, return_index=True)
        new = np.zeros(rows, dtype=bool)
        new[at] = first[at]
        seen[ids] = True
        kinds = np.where(new, "+I", np.where(rng.random(rows) < 0.15, "-D", "+U"))
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "name": pa.array(np.char.add("name-", ids.astype(str)).astype(object)),
                "amount": pa.array(rng.random(rows) * 100),
                "qty": pa.array(rng.integers(0, 1000, rows).astype(np.int32)),
                "seq": pa.array(np.arange(f * rows, (f + 1) * rows, dtype=np.int64)),
                "_row_kind": pa.array(kinds.astype(object), pa.string()),
            }
        )
        path = directory / f"part-{f:05d}.parquet"
        pq.write_table(table, path)
        stamp = time.time() - 10_000 + f  # Spark's file source orders files by mtime
        os.utime(path, (stamp, stamp))
        parts.append(table)
    return pa.concat_tables(parts)


def expected_rows(changes: pa.Table) -> pa.Table:
    """The last change per id, without ids whose last change is a delete."""
    last = changes.sort_by([("id", "ascending"), ("seq", "descending")])
    ids = last.column("id").to_numpy()
    keep = np.ones(len(ids), dtype=bool)
    keep[1:] = ids[1:] != ids[:-1]
    last = last.filter(pa.array(keep))
    last = last.filter(pc.not_equal(last.column("_row_kind"), "-D"))
    return last.drop_columns(["_row_kind"])


def create(spark: Any, name: str, identifier: bool) -> None:
    props = ", ".join(f"'{k}'='{v}'" for k, v in MOR.items())
    spark.sql(f"CREATE TABLE hc.db.{name} ({COLUMNS}) USING iceberg TBLPROPERTIES ({props})")
    if identifier:
        spark.sql(f"ALTER TABLE hc.db.{name} SET IDENTIFIER FIELDS id")


def run_merge(spark: Any, source: Path, work: Path, name: str) -> float:
    create(spark, name, identifier=False)

    def merge(df: Any, batch_id: int) -> None:
        view = f"changes_{batch_id}"
        df.createOrReplaceTempView(view)
        df.sparkSession.sql(dedup_merge_sql(f"hc.db.{name}", view))
        df.sparkSession.catalog.dropTempView(view)

    started = time.perf_counter()
    q = (
        parquet_stream(spark, source, 1)
        .writeStream.foreachBatch(merge)
        .option("checkpointLocation", str(work / f"chk-{name}"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return time.perf_counter() - started


def run_sink(
    spark: Any, source: Path, work: Path, warehouse: Path, name: str, shuffled: bool = False
) -> float:
    create(spark, name, identifier=True)
    one_task = sink_module.runs_in_one_task
    if shuffled:
        sink_module.runs_in_one_task = lambda job, *a: False  # type: ignore[assignment]
    catalog = ss.load_catalog("bench", type="hadoop", warehouse=str(warehouse))
    sink = IcebergSink(
        catalog=catalog,
        table=f"db.{name}",
        mode="upsert",
        row_kind_column="_row_kind",
        order_by="seq",
        checkpoint_location=str(work / f"chk-{name}"),
        state_dir=str(work / f"state-{name}"),
    )
    elapsed, _ = drain_into(sink, parquet_stream(spark, source, 1))
    sink_module.runs_in_one_task = one_task  # type: ignore[assignment]
    return elapsed


def compare(spark: Any, tables: list[str], expected: pa.Table) -> None:
    """Every table read by Iceberg's Spark reader equals ``expected`` exactly."""
    want = spark.createDataFrame(expected.to_pandas()).select("id", "name", "amount", "qty", "seq")
    for name in tables:
        # the session's catalog caches tables: the streams committed from elsewhere
        spark.sql(f"REFRESH TABLE hc.db.{name}")
        got = spark.table(f"hc.db.{name}").select("id", "name", "amount", "qty", "seq")
        extra, missing = got.exceptAll(want).count(), want.exceptAll(got).count()
        if extra or missing or got.count() != expected.num_rows:
            spark.sql(f"SELECT snapshot_id, operation, summary FROM hc.db.{name}.snapshots").show(
                30, truncate=120
            )
            raise SystemExit(f"{name}: {extra} unexpected rows, {missing} missing rows")
    print(f"  final tables equal ({expected.num_rows:,} live keys): {', '.join(tables)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--rows", type=int, default=40_000, help="changes per file")
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    use_iceberg_pyspark()
    root = Path(tempfile.mkdtemp(prefix="bench-upsert-merge-"))
    warehouse = root / "warehouse"
    try:
        changes = make_input(root / "input", args.files, args.rows, args.keys)
        make_input(root / "warm", 2, 1000, 500)
        expected = expected_rows(changes)
        spark = iceberg_session(str(warehouse))
        spark.sql("CREATE NAMESPACE IF NOT EXISTS hc.db")
        print(
            f"upsert: {changes.num_rows:,} changes in {args.files} files (one per micro-batch) "
            f"-> {expected.num_rows:,} live keys; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        run_merge(spark, root / "warm", root, "warm_merge")
        run_sink(spark, root / "warm", root, warehouse, "warm_sink")
        times: dict[str, list[float]] = {"merge": [], "ours": [], "shuffled": []}
        for r in range(args.rounds):
            times["merge"].append(run_merge(spark, root / "input", root, f"merge{r}"))
            times["ours"].append(run_sink(spark, root / "input", root, warehouse, f"sink{r}"))
            times["shuffled"].append(
                run_sink(spark, root / "input", root, warehouse, f"shuffled{r}", shuffled=True)
            )
            print(
                f"  round {r}: MERGE {times['merge'][-1]:6.2f} s   ours {times['ours'][-1]:6.2f} s"
                f"   ours shuffled {times['shuffled'][-1]:6.2f} s   "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        m, s, sh = (statistics.median(times[k]) for k in ("merge", "ours", "shuffled"))
        n = changes.num_rows
        print(f"  foreachBatch + MERGE INTO (merge-on-read): {m:6.2f} s  {n / m:10,.0f} rows/s")
        print(f"  IcebergSink(mode='upsert')               : {s:6.2f} s  {n / s:10,.0f} rows/s")
        print(f"  the same, shuffled by key                : {sh:6.2f} s  {n / sh:10,.0f} rows/s")
        print(f"  ratio MERGE time / ours: {m / s:.2f}x (shuffled route: {m / sh:.2f}x)")
        last = args.rounds - 1
        compare(spark, [f"merge{last}", f"sink{last}", f"shuffled{last}"], expected)
        jvm = jvm_peak_mib(spark)
        spark.stop()
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS: Python driver {own:.0f} MiB, JVM {jvm:.0f} MiB (both routes share them)")
        print(f"load average at end: {os.getloadavg()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
