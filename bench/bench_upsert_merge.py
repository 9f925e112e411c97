"""Upsert stream: ``IcebergSink(mode="upsert")`` against what a Spark user would write
instead, ``foreachBatch`` + dedup by key + ``MERGE INTO`` (merge-on-read) with Apache
Iceberg's own Spark runtime, on the same CDC changes in the same Spark session.

Run: ``.venv/bin/python bench/bench_upsert_merge.py [--files 10] [--rows 40000]
[--keys 100000] [--rounds 5] [--preload N] [--deletes positions]``: on pyspark 4.x the
script re-runs itself on the pyspark of peer set ``iceberg-spark-4.1`` (Apache Iceberg's
runtime for Spark 4.1 loads in no other Spark; see ``bench/iceberg_spark.py``); with
``.venv-spark35/bin/python`` it runs on pyspark 3.5 with set ``iceberg-spark-3.5``.

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

``--preload N``: both tables start each round with ``N`` live keys (ids 0 to N-1, written
by Spark, untimed), the changes' ids are drawn from them (updates and deletes of live
rows), and the shuffled side is left out. ``--deletes positions``: ours commits its
deletes as position deletes resolved at commit (``IcebergSink(deletes="positions")``;
its first batch builds the key index from the table, inside the timed run); the final
tables are then also read by pyiceberg, which applies no equality deletes.

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


def make_input(directory: Path, files: int, rows: int, keys: int, preload: int = 0) -> pa.Table:
    """Write the change files; return every change (for the expected result). Ids below
    ``preload`` are live in the table before the first change."""
    directory.mkdir(parents=True)
    rng = np.random.default_rng(16)
    seen = np.arange(keys) < preload
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


def preload_rows(n: int) -> pa.Table:
    """The rows a preloaded table starts with (``_row_kind`` ``+I``, before every change)."""
    ids = np.arange(n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "name": pa.array(np.char.add("base-", ids.astype(str)).astype(object)),
            "amount": pa.array(np.zeros(n)),
            "qty": pa.array(np.zeros(n, dtype=np.int32)),
            "seq": pa.array(np.full(n, -1, dtype=np.int64)),
            "_row_kind": pa.array(np.full(n, "+I").astype(object), pa.string()),
        }
    )


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


def load(spark: Any, name: str, preload: Path | None) -> None:
    """The table's preloaded rows (none without ``preload``), written by Spark."""
    if preload is not None:
        rows = spark.read.parquet(str(preload)).drop("_row_kind")
        rows.writeTo(f"hc.db.{name}").append()


def run_merge(
    spark: Any, source: Path, work: Path, name: str, preload: Path | None = None
) -> float:
    create(spark, name, identifier=False)
    load(spark, name, preload)

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
    spark: Any,
    source: Path,
    work: Path,
    warehouse: Path,
    name: str,
    shuffled: bool = False,
    preload: Path | None = None,
    deletes: str = "equality",
) -> float:
    create(spark, name, identifier=True)
    load(spark, name, preload)
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
        deletes=deletes,
        checkpoint_location=str(work / f"chk-{name}"),
        state_dir=str(work / f"state-{name}"),
    )
    elapsed, _ = drain_into(sink, parquet_stream(spark, source, 1))
    sink_module.runs_in_one_task = one_task  # type: ignore[assignment]
    return elapsed


def compare(spark: Any, tables: list[str], expected: pa.Table, work: Path) -> None:
    """Every table read by Iceberg's Spark reader equals ``expected`` exactly."""
    pq.write_table(expected, work / "expected.parquet")
    want = spark.read.parquet(str(work / "expected.parquet"))
    want = want.select("id", "name", "amount", "qty", "seq")
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
    ap.add_argument("--preload", type=int, default=0, help="live keys before the changes")
    ap.add_argument("--deletes", choices=("equality", "positions"), default="equality")
    args = ap.parse_args()
    use_iceberg_pyspark()
    root = Path(tempfile.mkdtemp(prefix="bench-upsert-merge-"))
    warehouse = root / "warehouse"
    try:
        keys = max(args.keys, args.preload)
        changes = make_input(root / "input", args.files, args.rows, keys, args.preload)
        make_input(root / "warm", 2, 1000, 500)
        preload = None
        if args.preload:
            preload = root / "preload.parquet"
            base = preload_rows(args.preload)
            pq.write_table(base.drop_columns(["_row_kind"]), preload)
            changes = pa.concat_tables([base, changes])
        expected = expected_rows(changes)
        spark = iceberg_session(str(warehouse))
        spark.sql("CREATE NAMESPACE IF NOT EXISTS hc.db")
        print(
            f"upsert: {changes.num_rows - args.preload:,} changes in {args.files} files (one per "
            f"micro-batch) into {args.preload:,} live keys -> {expected.num_rows:,} live keys, "
            f"deletes={args.deletes}; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        run_merge(spark, root / "warm", root, "warm_merge")
        run_sink(spark, root / "warm", root, warehouse, "warm_sink")
        times: dict[str, list[float]] = {"merge": [], "ours": [], "shuffled": []}
        for r in range(args.rounds):
            source = root / "input"
            times["merge"].append(run_merge(spark, source, root, f"merge{r}", preload))
            times["ours"].append(
                run_sink(spark, source, root, warehouse, f"sink{r}", False, preload, args.deletes)
            )
            if preload is None:
                name = f"shuffled{r}"
                times["shuffled"].append(
                    run_sink(spark, source, root, warehouse, name, True, None, args.deletes)
                )
            shuffled = f"ours shuffled {times['shuffled'][-1]:6.2f} s   " if preload is None else ""
            print(
                f"  round {r}: MERGE {times['merge'][-1]:6.2f} s   ours {times['ours'][-1]:6.2f} s"
                f"   {shuffled}load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        m, s = (statistics.median(times[k]) for k in ("merge", "ours"))
        n = changes.num_rows - args.preload
        print(f"  foreachBatch + MERGE INTO (merge-on-read): {m:6.2f} s  {n / m:10,.0f} rows/s")
        print(f"  IcebergSink(mode='upsert')               : {s:6.2f} s  {n / s:10,.0f} rows/s")
        print(f"  ratio MERGE time / ours: {m / s:.2f}x")
        if times["shuffled"]:
            sh = statistics.median(times["shuffled"])
            print(
                f"  the same, shuffled by key: {sh:6.2f} s  {n / sh:10,.0f} rows/s; "
                f"MERGE / it {m / sh:.2f}x"
            )
        last = args.rounds - 1
        finals = [f"merge{last}", f"sink{last}"] + ([] if preload else [f"shuffled{last}"])
        compare(spark, finals, expected, root)
        if args.deletes == "positions":
            read_with_pyiceberg(warehouse, f"sink{last}", expected)
        jvm = jvm_peak_mib(spark)
        spark.stop()
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS: Python driver {own:.0f} MiB, JVM {jvm:.0f} MiB (both routes share them)")
        print(f"load average at end: {os.getloadavg()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def read_with_pyiceberg(warehouse: Path, name: str, expected: pa.Table) -> None:
    """Our positions table read by pyiceberg (it refuses equality deletes): the expected
    rows, and no snapshot lists an equality delete file."""
    from pyiceberg.table import StaticTable

    from stream_sink.ops.drill.delete_files import equality_delete_snapshots

    table = ss.load_catalog("bench", type="hadoop", warehouse=str(warehouse)).load_table(
        f"db.{name}"
    )
    assert equality_delete_snapshots(table) == [], "a snapshot lists an equality delete file"
    got = StaticTable.from_metadata(table.metadata_location).scan().to_arrow()
    cols = ["id", "name", "amount", "qty", "seq"]
    got = got.select(cols).sort_by("id")
    assert got.equals(expected.select(cols).sort_by("id").cast(got.schema)), name
    print(f"  {name} read by pyiceberg: {got.num_rows:,} rows, equal; no equality deletes")


if __name__ == "__main__":
    main()
