"""Where an append micro-batch's time goes: the executor side, stage by stage, and the
driver side (commit, state, checkpoint) of IcebergSink, next to Iceberg's own writer.

Run: ``.venv-spark35/bin/python bench/profile_append.py [rows_per_file] [repeats]``
(defaults 250,000 and 5) on pyspark 3.5, or ``.venv/bin/python bench/profile_append.py``
on Spark 4.1 (it re-runs itself on the pyspark of peer set ``iceberg-spark-4.1``, see
``bench/iceberg_spark.py``). One micro-batch's worth of input
(2 Parquet files, as ``bench_vs_iceberg_spark.py`` triggers) is timed through:

- ``scan``: Spark reads the files (``format("noop")`` write: no output);
- ``to-python``: the rows cross JVM → Arrow → Python worker (``mapInArrow`` that only
  counts);
- ``arrow-route``: the sink's pyarrow write (``mapInArrow`` + TaskWriter, files and their
  metrics, no commit);
- ``spark-route``: Spark's own Parquet writer into the table's data location, then the
  footers read on the driver (``describe`` separately);
- ``iceberg-append``: Iceberg's own ``writeTo(...).append()`` (files and its commit);
- ``sink-batch``: a whole ``IcebergSink`` batch (``write_route`` auto), split into its
  write and its driver part (process + checkpoint + commit).

Medians of ``repeats`` runs after one warm-up each; the load average is printed.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa
from bench_spark_sink import make_input
from bench_vs_iceberg_spark import DDL, TABLE_SCHEMA
from iceberg_spark import iceberg_session, use_iceberg_pyspark

import stream_sink as ss
from stream_sink.spark import IcebergSink
from stream_sink.spark.foreach_batch.parquet_route import write_batch
from stream_sink.spark.tasks.iceberg import WriteTask
from stream_sink.spark.tasks.shared import RESULT_DDL
from stream_sink.write.writer_factory import TaskWriterFactory


def _count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    n = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict({"n": [n]})


def timed(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main(rows: int = 250_000, repeats: int = 5) -> None:
    use_iceberg_pyspark()
    root = Path(tempfile.mkdtemp(prefix="profile-append-"))
    print(f"load average at start: {os.getloadavg()}")
    try:
        make_input(root / "input", 2, rows)
        spark = iceberg_session(str(root / "warehouse"))
        spark.sql("CREATE NAMESPACE IF NOT EXISTS hc.db")
        spark.sql(f"CREATE TABLE hc.db.ice ({DDL}) USING iceberg")
        catalog = ss.load_catalog("p", type="hadoop", warehouse=str(root / "warehouse"))
        table = catalog.create_table("db.ours", schema=TABLE_SCHEMA)
        df = spark.read.parquet(str(root / "input"))
        total = 2 * rows

        def arrow_route() -> None:
            factory = TaskWriterFactory.for_table(table)
            df.mapInArrow(WriteTask(factory), RESULT_DDL).collect()

        described: list[float] = []

        def spark_route() -> None:
            factory = TaskWriterFactory.for_table(table)
            started = time.perf_counter()
            result = write_batch(df, factory, table.name)
            assert sum(f.record_count for f in result.data_files) == total
            described.append(time.perf_counter() - started)

        stages: dict[str, Callable[[], Any]] = {
            "scan": lambda: df.write.format("noop").mode("overwrite").save(),
            "to-python": lambda: df.mapInArrow(_count, "n long").collect(),
            "arrow-route": arrow_route,
            "spark-route": spark_route,
            "iceberg-append": lambda: df.writeTo("hc.db.ice").append(),
        }
        for name, fn in stages.items():
            t = timed(fn, repeats)
            print(f"{name:15s} {t * 1e3:8.0f} ms  {total / t:12,.0f} rows/s", flush=True)
        sink_batches(spark, catalog, root, rows, repeats)
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


def sink_batches(spark: Any, catalog: Any, root: Path, rows: int, repeats: int) -> None:
    """A stream of ``repeats + 1`` sink batches (2 files each, the first untimed): the
    write part and the driver part (process, checkpoint, commit) of each."""
    make_input(root / "stream-in", 2 * (repeats + 1), rows)
    catalog.create_table("db.sink", schema=TABLE_SCHEMA)
    sink = IcebergSink(
        catalog=catalog,
        table="db.sink",
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
    )
    write_ms: list[float] = []
    whole_ms: list[float] = []
    destination = sink._destination  # the sink's OneTable
    inner = destination._write

    def timed_write(*args: Any) -> Any:
        started = time.perf_counter()
        out = inner(*args)
        write_ms.append((time.perf_counter() - started) * 1e3)
        return out

    def batch(df: Any, batch_id: int) -> None:
        started = time.perf_counter()
        sink.foreach_batch(df, batch_id)
        whole_ms.append((time.perf_counter() - started) * 1e3)

    destination._write = timed_write  # type: ignore[attr-defined]
    source = root / "stream-in"
    q = (
        spark.readStream.schema(spark.read.parquet(str(source)).schema)
        .option("maxFilesPerTrigger", 2)
        .parquet(str(source))
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    sink.close()
    w, t = statistics.median(write_ms[1:]), statistics.median(whole_ms[1:])
    print(
        f"sink-batch      {t:8.0f} ms: write {w:.0f} ms, "
        f"driver (process+checkpoint+commit) {t - w:.0f} ms"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
