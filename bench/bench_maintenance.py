"""Maintenance benchmarks: commit latency with in-sink expiry, CDC scans before and after
maintenance, and compaction throughput.

    python bench/bench_maintenance.py [commits|scan|compaction|all] [--commits 2000]
        [--batches 40] [--batch-rows 20000] [--files 200] [--file-rows 10000]

- ``commits``: ``--commits`` small commits through the FilesCommitter (one small data
  file per checkpoint), with in-sink maintenance every 50 commits (compaction, then
  expiry of snapshots older than now, keeping 10). Prints the median commit latency (snapshot,
  checkpoint, notify) of the last 100 over the first 100 (goal <= 1.3; without expiry
  metadata grows with every snapshot).
- ``scan``: a CDC table after ``--batches`` upsert batches (equality deletes across
  batches): our scan before maintenance, after compaction + conversion + compaction of
  what has deletes, and DuckDB's ``read_parquet`` over the compacted files (baseline).
- ``compaction``: ``--files`` small files of ``--file-rows`` rows compacted by
  ``rewrite_data_files`` against ``pyarrow.parquet`` reading the same files and writing
  one file with the same codec (goal: ours >= 0.7x the baseline's throughput).

Every part prints its ratios against the baseline measured in the same run, and the
process's peak memory.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.catalogs import load_catalog
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.maintenance import MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.inventory import inventory
from stream_sink.tables import IcebergTable
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("v", pa.int64()),
        pa.field("data", pa.string()),
    ]
)


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- commits with in-sink expiry ---------------------------------------------------------


def bench_commits(root: Path, commits: int) -> None:
    catalog = load_catalog("bench", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=SCHEMA)
    committer = FilesCommitter(
        IcebergTarget(table),
        StateDirectory(str(root / "state"), kind="memory", sync=False),
        None,
        job_id="job",
        operator_id="sink",
    )
    committer.restore()
    options = MaintenanceOptions(
        commit_count=50,
        max_snapshot_age_ms=1,
        retain_last=10,
        convert_equality_deletes=False,
        background=False,
    )
    maintenance = SinkMaintenance(lambda: catalog.load_table("db.t"), options, "bench")
    factory = TaskWriterFactory.for_table(table)
    latencies = []
    for b in range(commits):
        writer = factory.create(0, b)  # one small real file per batch (not timed)
        writer.write(pa.table({"id": [b], "v": [b], "data": ["x"]}, schema=SCHEMA))
        result = writer.complete()
        started = time.perf_counter()
        committer.process(b, result)
        committer.snapshot_state(b)
        committer.notify_checkpoint_complete(b)
        latencies.append(time.perf_counter() - started)
        maintenance.after_commit(table.metadata)
    committer.close()
    first, last = statistics.median(latencies[:100]), statistics.median(latencies[-100:])
    live = len(inventory(table.refresh(), table.current_snapshot()).data)
    print(
        f"commits: {commits} one-file commits, in-sink compaction + expiry every 50 (keep "
        f"10): first 100 median {first * 1e3:.1f} ms, last 100 median {last * 1e3:.1f} ms, "
        f"ratio {last / first:.2f} (goal <= 1.3); at the end {len(table.snapshots())} "
        f"snapshots, {live} live data files; maintenance runs {maintenance.metrics.runs}, "
        f"failures {maintenance.metrics.failures}; peak {peak_mib():.0f} MiB"
    )


# --- CDC scans ------------------------------------------------------------------------------


def _cdc_table(root: Path, batches: int, rows: int) -> IcebergTable:
    catalog = load_catalog("bench", type="hadoop", warehouse=str(root / "cdc"))
    catalog.create_namespace("db")
    table = catalog.create_table("db.cdc", schema=SCHEMA, identifier_fields=["id"])
    rng = np.random.default_rng(1)
    keys = rows * 5
    for b in range(batches):
        ids = rng.choice(keys, size=rows, replace=False)
        table.upsert(
            pa.table(
                {"id": ids, "v": np.full(rows, b), "data": pa.array([f"row-{b}"] * rows)},
                schema=SCHEMA,
            )
        )
    return table


def _timed(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def bench_scan(root: Path, batches: int, rows: int) -> None:
    table = _cdc_table(root, batches, rows)
    count = table.scan().to_arrow().num_rows

    def scan_all() -> pa.Table:
        table.refresh()
        return table.scan().to_arrow()

    before = _timed(scan_all)
    m = table.maintenance
    started = time.perf_counter()
    m.rewrite_data_files(min_input_files=2)
    m.remove_dangling_deletes()
    m.convert_equality_deletes()
    m.rewrite_data_files(min_input_files=1)
    m.remove_dangling_deletes()
    maintain = time.perf_counter() - started
    after = _timed(scan_all)
    inv = inventory(table, table.current_snapshot())
    files = [f.path for f in inv.data]
    assert not inv.deletes and table.scan().to_arrow().num_rows == count
    con = duckdb.connect()
    listing = "[" + ",".join(f"'{f}'" for f in files) + "]"
    duck = _timed(lambda: con.execute(f"SELECT * FROM read_parquet({listing})").arrow())
    print(
        f"scan: CDC table of {count:,} live rows after {batches} upsert batches of {rows:,}: "
        f"ours before maintenance {before:.3f} s, after {after:.3f} s "
        f"(before/after {before / after:.1f}x); DuckDB read_parquet of the {len(files)} "
        f"compacted files {duck:.3f} s (ours/DuckDB {after / duck:.2f}x); maintenance "
        f"took {maintain:.1f} s; peak {peak_mib():.0f} MiB"
    )


# --- compaction throughput ------------------------------------------------------------------


def bench_compaction(root: Path, files: int, rows: int) -> None:
    catalog = load_catalog("bench", type="hadoop", warehouse=str(root / "comp"))
    catalog.create_namespace("db")
    table = catalog.create_table("db.small", schema=SCHEMA)
    rng = random.Random(2)
    for f in range(files):
        ids = np.arange(f * rows, (f + 1) * rows)
        table.append(
            pa.table(
                {"id": ids, "v": ids * 7, "data": [f"d{rng.randrange(1000)}" for _ in range(rows)]},
                schema=SCHEMA,
            )
        )
    paths = [f.path for f in inventory(table, table.current_snapshot()).data]
    total_bytes = sum(Path(p).stat().st_size for p in paths)

    def baseline() -> None:
        data = pa.concat_tables([pq.read_table(p) for p in paths])
        pq.write_table(data, str(root / f"baseline-{uuid.uuid4()}.parquet"), compression="zstd")

    base = _timed(baseline, repeat=2)
    started = time.perf_counter()
    result = table.maintenance.rewrite_data_files(min_input_files=2)
    ours = time.perf_counter() - started
    n = files * rows
    print(
        f"compaction: {files} files, {n:,} rows, {total_bytes / 2**20:.1f} MiB -> "
        f"{result.added_data_files} file(s): ours {ours:.2f} s ({n / ours:,.0f} rows/s), "
        f"pyarrow.parquet read+write {base:.2f} s ({n / base:,.0f} rows/s); throughput "
        f"ratio {base / ours:.2f}x (goal >= 0.7); peak {peak_mib():.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "part", nargs="?", default="all", choices=("commits", "scan", "compaction", "all")
    )
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--file-rows", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-maintenance-") as tmp:
        root = Path(tmp)
        if args.part in ("commits", "all"):
            bench_commits(root, args.commits)
        if args.part in ("scan", "all"):
            bench_scan(root, args.batches, args.batch_rows)
        if args.part in ("compaction", "all"):
            bench_compaction(root, args.files, args.file_rows)


if __name__ == "__main__":
    main()
