"""Upserts committed with ``deletes="positions"`` against ``deletes="equality"`` plus the
conversion a pyiceberg-readable table needs afterwards, without Spark.

Run: ``python bench/bench_position_deletes.py [keys] [changes] [batches] [version]`` (defaults
1,000,000, 50,000, 5 and 3). A table gets ``keys`` rows, then ``batches`` upserts of
``changes`` random existing keys each, written by the real CDC writer (one task) and
committed by the sink's commit step (``commit_group``, one row delta a batch). Each
mode runs in a process of its own (peak RSS is per mode):

- ``equality``: each batch commits its equality deletes; at the end
  ``convert_equality_deletes`` makes the last snapshot readable by pyiceberg;
- ``converted``: as ``equality`` with ``convert_equality_deletes`` after every batch
  (timed with it), so every batch becomes readable by pyiceberg, as with positions;
- ``positions``: each batch's deletes are resolved at commit through the driver's key
  index (built at the first batch from the table, then moved forward per batch) and
  committed as deletion vectors (v3) or position delete files (v2).

Printed per mode: the first batch (positions: includes building the index), the median
of the others, the conversion (equality), the total until the table is readable without
equality deletes, peak RSS and (positions) the index's bytes per live key; then the
ratio equality+conversion / positions, with the load average before and after.
"""

from __future__ import annotations

import json
import os
import resource
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
from stream_sink.write.task_writers import write_through
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def rows_of(ids: np.ndarray, tag: str) -> pa.Table:
    values = np.char.add(f"{tag}-", ids.astype(str)).astype(object)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(values)}, schema=SCHEMA)


def run(mode: str, keys: int, changes: int, batches: int, version: int) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix=f"bench-positions-{mode}-")
    catalog = load_catalog(mode, type="hadoop", warehouse=os.path.join(root, "w"))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", SCHEMA, identifier_fields=["id"], format_version=version)
    t.append(rows_of(np.arange(keys), "base"))
    factory = TaskWriterFactory.for_table(t, equality_fields=["id"], upsert=True)
    resolver = PositionResolver() if mode == "positions" else None
    who = SinkIdentity("bench", "sink", "main", {})
    metrics = CommitterMetrics(time.monotonic)
    rng = np.random.default_rng(7)
    times = []
    for b in range(batches):
        ids = rng.choice(keys, changes, replace=False)
        batch = rows_of(ids, f"b{b}").append_column("_row_kind", pa.array(["+I"] * changes))
        start = time.perf_counter()
        result = write_through(factory.create(0, b), [batch])
        group = CommitGroup(Shape.ROW_DELTA, (StagedBatch(b, b, b"", result),), b)
        assert commit_group(t, group, who, metrics, resolver) is None
        if mode == "converted":
            t.maintenance.convert_equality_deletes()
        times.append(time.perf_counter() - start)
    out: dict[str, Any] = {
        "first_s": times[0],
        "median_s": statistics.median(times[1:] or times),
        "batches_s": sum(times),
    }
    convert = 0.0
    if mode == "equality":
        start = time.perf_counter()
        t.maintenance.convert_equality_deletes()
        convert = time.perf_counter() - start
    out["convert_s"] = convert
    out["readable_s"] = out["batches_s"] + convert
    if resolver is not None and resolver.index is not None:
        out["index_bytes_per_key"] = resolver.index.nbytes / max(1, resolver.index.live)
        out["index_builds"] = resolver.builds
    t.refresh()
    got = t.scan().to_arrow().num_rows
    assert got == keys, f"{mode}: {got} rows, expected {keys}"
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--one":
        mode, *nums = argv[1:]
        keys, changes, batches, version = (int(n) for n in nums)
        print(json.dumps(run(mode, keys, changes, batches, version)))
        return
    defaults = [1_000_000, 50_000, 5, 3]
    keys, changes, batches, version = [int(a) for a in argv] + defaults[len(argv) :]
    before = os.getloadavg()[0]
    print(f"{keys:,} keys, {batches} batches of {changes:,} upserts, v{version}; load {before:.2f}")
    results = {}
    for mode in ("equality", "converted", "positions"):
        sizes = map(str, (keys, changes, batches, version))
        args = [sys.executable, __file__, "--one", mode, *sizes]
        line = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        results[mode] = r = json.loads(line.strip().splitlines()[-1])
        extra = (
            f", index {r['index_bytes_per_key']:.1f} B/key ({r['index_builds']} build)"
            if "index_bytes_per_key" in r
            else f", conversion {r['convert_s']:.2f} s"
        )
        print(
            f"  {mode:9s}: first batch {r['first_s']:.2f} s, median batch {r['median_s']:.2f} s, "
            f"readable after {r['readable_s']:.2f} s{extra}, peak {r['peak_mib']:.0f} MiB"
        )
    pos = results["positions"]
    ratio = results["equality"]["readable_s"] / pos["readable_s"]
    every = results["converted"]["readable_s"] / pos["readable_s"]
    median = pos["median_s"] / results["equality"]["median_s"]
    after = os.getloadavg()[0]
    print(
        f"  equality+final conversion / positions: {ratio:.2f}x; conversion every batch / "
        f"positions: {every:.2f}x; positions' median batch / equality's: {median:.2f}x; "
        f"load {before:.2f} -> {after:.2f}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
