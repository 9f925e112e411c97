"""Where a Delta upsert batch's distinct keys live: the driver (up to ``driver_key_limit``)
or the executors (beyond it).

Run: ``python bench/bench_delta_keys.py hold [N …]`` and
``python bench/bench_delta_keys.py upsert [N] [rounds]``.

``hold``: for each N (default 4M 16M 64M) in a fresh process with the default driver
memory (``spark.driver.memory`` 1g, ``local_session``): the driver-side work of the
driver route for a batch of N distinct long keys (collect them as Arrow, build the
rewrite task carrying them, pickle it as Spark ships it); prints keys, seconds, peak RSS
of the Python driver, peak JVM heap, and whether it held (a failure prints its first
line). ``upsert``: one ``DeltaSink`` upsert of N keys (default 200,000; half of them
already in the table) by each route, rounds interleaved, after an untimed run of each:
prints seconds per route and the ratio executors / driver, with peak RSS.

Measured (2 cores under a load average near 43, so seconds are long; the verdicts are
what counts): 8,000,000 keys held (370 s, driver RSS 314 MiB, JVM heap pools' peaks
1,088 MiB, the task carrying the keys pickled to 61 MiB, shipped with every rewrite
task); 32,000,000 keys failed (a task of the collect aborted, the JVM out of room at
1g). Hence ``driver_key_limit`` defaults to 1,000,000: a factor 8 below the last size
that held, and a rewrite task of about 8 MiB. ``upsert 100000 1``: keys on the driver
18.46 s, on the executors 25.84 s (1.40x: the extra aggregate, read and joins cost on
small batches), peak driver RSS 158 MiB.
"""

from __future__ import annotations

import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa

from stream_sink.spark import local_session


def _jvm_peak_heap_mb(spark: Any) -> float:
    pools = spark._jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
    peak = 0
    for pool in pools:
        if str(pool.getType()) == "Heap memory":
            peak += pool.getPeakUsage().getUsed()
    return peak / 2**20


def hold_one(n: int) -> None:
    """The driver route's driver-side work for ``n`` keys (in this process)."""
    from stream_sink.spark.tasks.delta import DeltaRewriteTask, TableShape

    spark = local_session("bench-delta-keys")
    started = time.perf_counter()
    try:
        keys = spark.range(n).selectExpr("id * 7 AS id").distinct()
        touched = keys.toArrow()
        shape = TableShape("/tmp/none", '{"type":"struct","fields":[]}', ())
        task = DeltaRewriteTask(shape, ("id",), touched, 0)
        shipped = len(pickle.dumps(task))
        verdict = f"held ({touched.num_rows:,} keys, task pickled {shipped / 2**20:.0f} MiB)"
    except Exception as e:
        verdict = "FAILED: " + str(e).strip().splitlines()[0][:160]
    seconds = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        heap = f"{_jvm_peak_heap_mb(spark):.0f}"
    except Exception:
        heap = "?"
    memory = f"driver RSS {rss:6.0f} MiB  JVM heap {heap} MiB"
    print(f"{n:>12,} keys  {seconds:7.1f} s  {memory}  {verdict}")


def hold(sizes: list[int]) -> None:
    print("driver route, driver-side work per batch (default driver memory 1g):")
    for n in sizes:
        subprocess.run([sys.executable, __file__, "hold-one", str(n)], check=False, timeout=1800)


def _upsert(spark: Any, root: Path, n: int, limit: int) -> float:
    """Seconds of the MERGE's write (rewrite of the touched files, new rows) of a batch of
    ``n`` keys, half of them in the table (written as 8 files); nothing is committed."""
    import numpy as np

    from stream_sink.delta import DeltaTable
    from stream_sink.spark import DeltaSink

    shutil.rmtree(root, ignore_errors=True)
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("seq", pa.int64())])
    table = DeltaTable.create(str(root / "t"), schema)
    for part in np.array_split(np.arange(0, n, 2, dtype=np.int64), 8):
        table.append(pa.table({"id": part, "v": ["a"] * len(part), "seq": part}, schema=schema))
    sink = DeltaSink(
        path=str(root / "t"),
        mode="upsert",
        equality_fields=["id"],
        order_by="seq",
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
        driver_key_limit=limit,
    )
    df = spark.range(n // 2, n // 2 + n).selectExpr("id", "'b' AS v", "id + 1000000000 AS seq")
    started = time.perf_counter()
    sink._write(df, table.refresh(), 1)
    return time.perf_counter() - started


def upsert(n: int, rounds: int) -> None:
    spark = local_session("bench-delta-keys")
    root = Path(tempfile.mkdtemp())
    routes = {"driver": 2**31 - 2, "executors": 0}
    for limit in routes.values():
        _upsert(spark, root, max(1000, n // 10), limit)  # untimed
    times: dict[str, list[float]] = {r: [] for r in routes}
    for _ in range(rounds):
        for route, limit in routes.items():
            times[route].append(_upsert(spark, root, n, limit))
    best = {r: min(t) for r, t in times.items()}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"upsert of {n:,} keys (half already in the table), best of {rounds}:")
    for route, seconds in best.items():
        print(f"  keys on the {route:<9}  {seconds:7.2f} s")
    print(f"  ratio executors / driver  {best['executors'] / best['driver']:.2f}x")
    print(f"  peak RSS of the Python driver {rss:.0f} MiB")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "hold"
    args = [int(a) for a in sys.argv[2:]]
    if what == "hold-one":
        hold_one(args[0])
    elif what == "hold":
        hold(args or [4_000_000, 16_000_000, 64_000_000])
    else:
        upsert(args[0] if args else 200_000, args[1] if len(args) > 1 else 2)
