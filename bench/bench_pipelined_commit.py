"""Synchronous vs pipelined commit (``commit_mode``), one Spark session, both targets.

Run: ``python bench/bench_pipelined_commit.py [files] [rows_per_file] [rounds] [targets]``
(defaults 24 x 50,000, 3 rounds, targets ``iceberg,delta``; add ``iceberg-upsert`` for
an upsert stream keyed by ``key``). The same Parquet input (one file per micro-batch,
availableNow) streams through ``foreachBatch`` into a new table per run: IcebergSink
(append) into an unpartitioned Iceberg table of a Hadoop catalog, DeltaSink (append)
into a Delta table (without the ``ts`` column), each with
``commit_mode="synchronous"`` and ``"pipelined"``. One untimed run of each side first
(JVM code paths, Python workers); then rounds interleaved, alternating which mode goes
first. Every final table is read back and must
hold every row (Iceberg) or every key (upsert).

Prints per run: rows/s over the whole query (start to stop, as every stream bench
here), and per micro-batch (medians): the time spent in ``foreach_batch`` (what Spark
waits for before it acknowledges the batch), the part of it in the commit driver
(``record``: phase 1 only when pipelined, with the wait for the previous commit), the
table commit's own time (``last_commit_duration_ms``: on the batch's path when
synchronous, beside the next batch when pipelined), the interval between two batches'
starts (the pace of the stream); for pipelined runs also the time batches waited for
the previous commit in all. Then per target the medians and the ratio synchronous /
pipelined time, the peak resident memory of the driver's Python and of the JVM (one
session: both modes), and the load average at the start and end.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_sink import SCHEMA, make_input
from streams import jvm_peak_mib, parquet_stream

import stream_sink as ss
from stream_sink.delta import DeltaTable
from stream_sink.spark import DeltaSink, IcebergSink, local_session
from stream_sink.spark.runtime import SinkRuntime

MODES = ("synchronous", "pipelined")
TABLE_SCHEMA = pa.schema([f.with_nullable(f.name != "key") for f in SCHEMA])


RECORDED: list[float] = []
"""Seconds each micro-batch spent in the commit driver (``SinkRuntime.record``: phase 1,
and phase 2 too when synchronous), for the run under way."""
_record = SinkRuntime.record


def _timed_record(self: SinkRuntime, batch_id: int, result: Any) -> int:
    started = time.perf_counter()
    try:
        return _record(self, batch_id, result)
    finally:
        RECORDED.append(time.perf_counter() - started)


SinkRuntime.record = _timed_record  # type: ignore[method-assign]


@dataclass
class Run:
    """One timed query: its time, and per micro-batch when it started, how long it
    spent in ``foreach_batch`` and in the commit driver, and its table commit's time."""

    seconds: float
    starts: list[float]
    in_batch: list[float]
    wait_ms: float | None
    in_driver: list[float]
    commit_ms: list[float]

    def median_in_driver_ms(self) -> float:
        return statistics.median(self.in_driver) * 1000

    def median_commit_ms(self) -> float:
        return statistics.median(self.commit_ms) if self.commit_ms else 0.0

    def median_in_batch_ms(self) -> float:
        return statistics.median(self.in_batch) * 1000

    def median_interval_ms(self) -> float:
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:], strict=False)]
        return statistics.median(gaps) * 1000 if gaps else 0.0


def timed(sink: Any, df: Any) -> Run:
    """Drain ``df`` into ``sink`` (closed at the end), timing each ``foreach_batch``."""
    starts: list[float] = []
    in_batch: list[float] = []
    waits: list[float] = []
    commits: list[float] = []
    RECORDED.clear()

    def foreach(batch: Any, batch_id: int) -> None:
        started = time.perf_counter()
        starts.append(started)
        sink.foreach_batch(batch, batch_id)
        in_batch.append(time.perf_counter() - started)
        door = getattr(sink, "_destination", sink)  # IcebergSink's OneTable, or a DeltaSink
        runtime = door._runtime  # the bench reads the driver's metrics of either sink
        m = runtime.metrics() if runtime is not None else None
        if m is not None and m.last_commit_duration_ms is not None:
            commits.append(m.last_commit_duration_ms)
        if m is not None and m.last_commit_wait_ms is not None:
            waits[:] = [m.commit_wait_ms_total]

    started = time.perf_counter()
    q = (
        df.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    sink.close()
    wait = waits[0] if waits else None
    return Run(time.perf_counter() - started, starts, in_batch, wait, list(RECORDED), commits)


def iceberg_runner(upsert: bool) -> Callable[[Any, Path, Path, str, str], tuple[Run, int]]:
    def run(spark: Any, source: Path, work: Path, name: str, mode: str) -> tuple[Run, int]:
        catalog = ss.load_catalog("bench", type="hadoop", warehouse=str(work / "warehouse"))
        catalog.create_namespace("db")
        keys = ["key"] if upsert else None
        catalog.create_table("db.t", schema=TABLE_SCHEMA, identifier_fields=keys)
        sink = IcebergSink(
            catalog=catalog,
            table="db.t",
            mode="upsert" if upsert else "append",
            order_by="id" if upsert else None,
            checkpoint_location=str(work / "chk"),
            state_dir=str(work / "state"),
            commit_mode=mode,
        )
        result = timed(sink, parquet_stream(spark, source, 1))
        return result, catalog.load_table("db.t").scan().to_arrow().num_rows

    return run


def delta_run(spark: Any, source: Path, work: Path, name: str, mode: str) -> tuple[Run, int]:
    sink = DeltaSink(
        path=str(work / "lake" / name),
        checkpoint_location=str(work / "chk"),
        state_dir=str(work / "state"),
        commit_mode=mode,
    )
    # without ``ts``: DeltaSink cannot create a table with a timestamp column on pyspark
    # 4.3 (to_arrow_schema without a time zone)
    result = timed(sink, parquet_stream(spark, source, 1).drop("ts"))
    return result, DeltaTable.load(str(work / "lake" / name)).to_arrow().num_rows


RUNNERS = {
    "iceberg": iceberg_runner(upsert=False),
    "iceberg-upsert": iceberg_runner(upsert=True),
    "delta": delta_run,
}


def run_rounds(
    spark: Any, root: Path, target: str, rounds: int, want: int, total: int
) -> dict[str, list[Run]]:
    """Interleaved runs of both modes; ``want`` rows in every final table, ``total``
    rows streamed."""
    runs: dict[str, list[Run]] = {m: [] for m in MODES}
    for r in range(-1, rounds):  # round -1: the untimed warm-up
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            work = root / "work" / f"{target}-{mode}-{r + 1}"
            run, rows = RUNNERS[target](spark, root / "input", work, "t", mode)
            if rows != want:
                raise SystemExit(f"{target} {mode}: {rows:,} rows in the table, expected {want:,}")
            shutil.rmtree(work, ignore_errors=True)
            if r < 0:
                continue
            runs[mode].append(run)
            wait = "" if run.wait_ms is None else f"  waited {run.wait_ms:7.0f} ms in all"
            print(
                f"round {r + 1} {target:14s} {mode:11s} {run.seconds:6.2f} s "
                f"{total / run.seconds:10,.0f} rows/s  in batch {run.median_in_batch_ms():4.0f} ms"
                f"  in driver {run.median_in_driver_ms():4.0f} ms  table commit "
                f"{run.median_commit_ms():4.0f} ms  interval {run.median_interval_ms():5.0f} ms"
                f"{wait}",
                flush=True,
            )
    return runs


def report(target: str, runs: dict[str, list[Run]], total: int) -> None:
    print(f"{target}: medians over {len(runs['pipelined'])} interleaved rounds")
    for mode, rs in runs.items():
        seconds = statistics.median(r.seconds for r in rs)
        print(
            f"  {mode:11s} {seconds:6.2f} s {total / seconds:10,.0f} rows/s  "
            f"in batch {statistics.median(r.median_in_batch_ms() for r in rs):4.0f} ms  "
            f"in driver {statistics.median(r.median_in_driver_ms() for r in rs):4.0f} ms  "
            f"table commit {statistics.median(r.median_commit_ms() for r in rs):4.0f} ms  "
            f"interval {statistics.median(r.median_interval_ms() for r in rs):5.0f} ms"
        )
    sync, pipe = runs["synchronous"], runs["pipelined"]
    ratio = statistics.median(s.seconds for s in sync) / statistics.median(p.seconds for p in pipe)
    paired = statistics.median(s.seconds / p.seconds for s, p in zip(sync, pipe, strict=True))
    print(
        f"  ratio synchronous / pipelined time: {ratio:.2f}x "
        f"(median of per-round ratios {paired:.2f}x)"
    )


def main(
    files: int = 24, rows: int = 50_000, rounds: int = 3, targets: str = "iceberg,delta"
) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-pipelined-"))
    print(f"load average at start: {os.getloadavg()}", flush=True)
    try:
        make_input(root / "input", files, rows)
        spark = local_session("bench-pipelined-commit")
        print(
            f"{files} files x {rows:,} rows, one file per micro-batch, local[2], "
            f"pyspark {spark.version}",
            flush=True,
        )
        for target in targets.split(","):
            want = _keys(files, rows) if target == "iceberg-upsert" else files * rows
            total = files * rows
            report(target, run_rounds(spark, root, target, rounds, want, total), total)
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"peak RSS (every run, one session): driver Python {own:,.0f} MiB, "
            f"JVM {jvm_peak_mib(spark):,.0f} MiB"
        )
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


def _keys(files: int, rows: int) -> int:
    """Distinct ``key`` values of the input (``key = id mod 100,000``, see ``make_input``)."""
    return min(files * rows, 100_000)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(int(a) for a in args[:3]), *args[3:4])  # type: ignore[arg-type]
