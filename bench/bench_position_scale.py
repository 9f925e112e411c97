"""``deletes="positions"`` upsert batch time against the table's size, without Spark.

Run: ``python bench/bench_position_scale.py [sizes] [changes] [batches] [version]``
(defaults ``1000000,10000000``, 50,000, 6 and 3; #37's goal adds 100,000,000). For each
size, in a process of its own (peak RSS is per size), a ``bucket(16, id)`` table gets
``size`` live keys (appended in chunks of at most 5M rows, so 16 data files a chunk),
then ``batches`` upserts of ``changes`` random existing keys each, written by the real CDC
writer (one task) and committed by the sink's commit step (``commit_group`` with the
driver's position resolver, one row delta a batch).

Printed per size: the first batch (it builds the key index from the table's key
column: the cost of a query start, or of a foreign commit), the median of the others
(steady state: the index is moved forward from each batch), the ratio of that median to
the smallest size's, peak RSS, the index's bytes per live key, and the load before and
after. Each snapshot's manifests are checked to hold no equality delete file, and the
final table is read back by ours with every row counted once.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.commit.iceberg.position_deletes import PositionResolver
from stream_sink.commit.iceberg.table_commit import SinkIdentity, commit_group
from stream_sink.commit.shapes import CommitGroup, Shape, StagedBatch
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.ops.drill.delete_files import equality_delete_snapshots
from stream_sink.write.task_writers import write_through
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
CHUNK = 5_000_000


def _rows(ids: np.ndarray, tag: int) -> pa.Table:
    return pa.table({"id": ids.astype(np.int64), "v": np.full(len(ids), tag, np.int64)}, SCHEMA)


def _fill(table: Any, size: int) -> float:
    start = time.perf_counter()
    for lo in range(0, size, CHUNK):
        table.append(_rows(np.arange(lo, min(size, lo + CHUNK)), -1))
    return time.perf_counter() - start


def run(size: int, changes: int, batches: int, version: int) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="bench-position-scale-")
    try:
        return _run(root, size, changes, batches, version)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(root: str, size: int, changes: int, batches: int, version: int) -> dict[str, Any]:
    catalog = load_catalog("scale", type="hadoop", warehouse=os.path.join(root, "w"))
    catalog.create_namespace("db")
    t = catalog.create_table(
        "db.t",
        SCHEMA,
        partition_spec=[("bucket", "id", 16)],
        identifier_fields=["id"],
        format_version=version,
    )
    fill_s = _fill(t, size)
    factory = TaskWriterFactory.for_table(t, equality_fields=["id"], upsert=True)
    resolver = PositionResolver()
    who = SinkIdentity("bench", "sink", "main", {})
    metrics = CommitterMetrics(time.monotonic)
    rng = np.random.default_rng(7)
    times = []
    for b in range(batches):
        batch = _rows(rng.choice(size, changes, replace=False), b)
        batch = batch.append_column("_row_kind", pa.array(["+U"] * changes))
        start = time.perf_counter()
        result = write_through(factory.create(0, b), [batch])
        group = CommitGroup(Shape.ROW_DELTA, (StagedBatch(b, b, b"", result),), b)
        assert commit_group(t, group, who, metrics, resolver) is None
        times.append(time.perf_counter() - start)
    index = resolver.index
    assert index is not None
    out = {
        "fill_s": fill_s,
        "first_s": times[0],
        "median_s": statistics.median(times[1:]),
        "times": times,
        "index_bytes_per_key": index.nbytes / max(1, index.live),
        "index_builds": resolver.builds,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    t.refresh()
    ids = t.scan(columns=("id",)).to_arrow().column("id")
    assert len(ids) == size == len(np.unique(ids.to_numpy())), f"{len(ids)} rows, {size} keys"
    out["equality_delete_files"] = len(equality_delete_snapshots(t))
    assert out["equality_delete_files"] == 0
    return out


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--one":
        size, changes, batches, version = (int(n) for n in argv[1:])
        print(json.dumps(run(size, changes, batches, version)))
        return
    defaults = ["1000000,10000000", "50000", "6", "3"]
    sizes_arg, *nums = argv + defaults[len(argv) :]
    sizes = [int(s) for s in sizes_arg.split(",")]
    changes, batches, version = (int(n) for n in nums)
    print(
        f"bucket(16, id), {batches} batches of {changes:,} upserts, v{version}; "
        f"load {os.getloadavg()[0]:.2f}"
    )
    base = None
    for size in sizes:
        load = os.getloadavg()[0]
        args = [sys.executable, __file__, "--one", str(size), str(changes), str(batches)]
        line = subprocess.run([*args, str(version)], check=True, capture_output=True, text=True)
        r = json.loads(line.stdout.strip().splitlines()[-1])
        base = base or r["median_s"]
        print(
            f"  {size:>11,} keys: median batch {r['median_s']:.3f} s "
            f"({r['median_s'] / base:.2f}x the first size), first batch (index build) "
            f"{r['first_s']:.2f} s, index {r['index_bytes_per_key']:.1f} B/key, "
            f"peak {r['peak_mib']:,.0f} MiB, table filled in {r['fill_s']:.0f} s, "
            f"snapshots with equality deletes {r['equality_delete_files']}; batches "
            + ", ".join(f"{x:.2f}" for x in r["times"])
            + f"; load {load:.2f} -> {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
