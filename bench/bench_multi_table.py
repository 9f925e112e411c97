"""A routed checkpoint's commit to several tables: one catalog transaction (all tables at
once, ``commit.iceberg.multi_table.commit_checkpoint``) against the same snapshots
committed table by table (``commit_group`` per table, what a catalog without atomic
commits gets), without Spark.

Run: ``python bench/bench_multi_table.py [tables] [checkpoints] [catalog]`` (defaults 3, 40
and ``sqlite``; ``postgres`` reads its URL from ``STREAM_SINK_BENCH_POSTGRES_URL``, a
database the script may create tables in). Each checkpoint appends one small data file
(written before the clock starts) to every table; the two modes alternate checkpoint by
checkpoint on tables of their own in the same catalog, so both see the same machine.

Printed per mode: median and 95th percentile of a checkpoint's commit (every table),
then the ratio per-table / atomic, peak RSS of the process and the load average before
and after. The atomic mode writes every table's metadata file first and moves every
pointer in one database transaction; table by table pays one transaction per table.
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import time
import uuid

import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.commit.iceberg.multi_table import TableCheckpoint, commit_checkpoint
from stream_sink.commit.iceberg.table_commit import SinkIdentity, commit_group
from stream_sink.commit.shapes import CommitGroup, Shape, StagedBatch
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.table.catalog import Catalog
from stream_sink.table.table import Table
from stream_sink.write.task_writers import write_through
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
JOB = "bench-job"


def open_catalog(kind: str, root: str) -> Catalog:
    if kind == "postgres":
        uri = os.environ.get("STREAM_SINK_BENCH_POSTGRES_URL")
        if not uri:
            sys.exit("catalog postgres: set STREAM_SINK_BENCH_POSTGRES_URL to a database URL")
    else:
        uri = f"sqlite:///{root}/catalog.db"
    return load_catalog(f"bench{uuid.uuid4().hex[:6]}", type="sql", uri=uri, warehouse=root)


def checkpoint(tables: list[Table], batch: int) -> list[TableCheckpoint]:
    """One checkpoint's staged append for every table (its files already written)."""
    out = []
    for t in tables:
        rows = pa.table({"id": [batch], "v": [t.name]}, schema=SCHEMA)
        files = write_through(TaskWriterFactory.for_table(t).create(0, 0), [rows])
        group = CommitGroup(Shape.APPEND, (StagedBatch(batch, batch, b"", files),), batch)
        who = SinkIdentity(JOB, f"bench={t.name}", "main", {})
        out.append(TableCheckpoint(t, group, who, CommitterMetrics(lambda: 0.0)))
    return out


def one_by_one(parts: list[TableCheckpoint]) -> None:
    for p in parts:
        assert commit_group(p.table, p.group, p.who, p.metrics) is None


def atomic(parts: list[TableCheckpoint]) -> None:
    assert all(v is None for v in commit_checkpoint(parts).values())


def main(n_tables: int, checkpoints: int, kind: str) -> None:
    load_before = os.getloadavg()[0]
    root = tempfile.mkdtemp(prefix="bench-multi-table-")
    catalog = open_catalog(kind, root)
    ns = f"b{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(ns)
    modes = {"atomic": atomic, "per-table": one_by_one}
    tables = {m: [catalog.create_table(f"{ns}.{m[0]}{i}", SCHEMA) for i in range(n_tables)]
              for m in modes}  # fmt: skip
    times: dict[str, list[float]] = {m: [] for m in modes}
    for batch in range(checkpoints):
        for mode, commit in modes.items():
            parts = checkpoint(tables[mode], batch)
            start = time.perf_counter()
            commit(parts)
            times[mode].append(time.perf_counter() - start)
    print(f"{n_tables} tables, {checkpoints} checkpoints, SQL catalog on {kind}")
    for mode, ts in times.items():
        p95 = sorted(ts)[int(0.95 * (len(ts) - 1))]
        print(
            f"{mode:>10}: median {statistics.median(ts) * 1000:7.1f} ms, p95 {p95 * 1000:7.1f} ms"
        )
    ratio = statistics.median(times["per-table"]) / statistics.median(times["atomic"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"per-table / atomic: {ratio:.2f}x; peak RSS {peak:.0f} MiB")
    print(f"load average: {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args else 3,
        int(args[1]) if len(args) > 1 else 40,
        args[2] if len(args) > 2 else "sqlite",
    )
