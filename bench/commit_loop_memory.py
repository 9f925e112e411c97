"""Does the driver's memory grow over a long stream? (no Spark)

    python bench/commit_loop_memory.py [--commits 2000] [--top 12]

The driver's side of an upsert stream, as ``IcebergSink`` runs it: every commit writes a
real upsert batch (50 rows onto 2,000 keys, equality and position deletes) with the
CDC writers, passes it through the ``FilesCommitter`` (RocksDB state, synced) into a
Hadoop-catalog ``bucket(4, id)`` table, then calls the in-sink maintenance
(``commit_count=10``, ``max_snapshot_age_ms=60_000``, ``retain_last=5``, in its
background thread) as the sink does. ``tracemalloc`` snapshots after the first
twentieth of the commits and at the end: prints RSS, traced (Python) memory and
Arrow's allocated bytes at each twentieth, and the lines whose allocations grew most
between the two snapshots.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.maintenance import MaintenanceOptions, SinkMaintenance
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
KEYS = 2000


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def batch(rng: random.Random, b: int) -> pa.Table:
    ids = [rng.randrange(KEYS) for _ in range(50)]
    return pa.table(
        {
            "_row_kind": ["+U"] * len(ids),
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([b] * len(ids), pa.int64()),
        }
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--commits", type=int, default=2000)
    p.add_argument("--top", type=int, default=12)
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="commit-loop-"))
    try:
        catalog = load_catalog("b", type="hadoop", warehouse=str(root / "wh"))
        catalog.create_namespace("db")
        table = catalog.create_table(
            "db.t", schema=SCHEMA, partition_spec=[("bucket", "id", 4)], identifier_fields=["id"]
        )
        committer = FilesCommitter(
            IcebergTarget(table),
            StateDirectory(str(root / "state" / "t"), kind="rocksdb"),
            CheckpointStorage(str(root / "checkpoints"), "t"),
            job_id="bench",
            operator_id="t",
        )
        committer.restore()
        options = MaintenanceOptions(commit_count=10, max_snapshot_age_ms=60_000, retain_last=5)
        maintenance = SinkMaintenance(lambda: catalog.load_table("db.t"), options, "sink:t")
        maintenance.protect(committer.uncommitted_paths)
        rng = random.Random(1)
        tracemalloc.start(1)
        first = None
        started = time.perf_counter()
        for b in range(a.commits):
            factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
            writer = factory.create(0, b)
            writer.write(batch(rng, b))
            committer.process(b, writer.complete())
            committer.snapshot_state(b)
            committer.complete_checkpoint(b)
            committer.notify_checkpoint_complete(b)
            maintenance.after_commit(table.metadata)
            if (b + 1) % max(a.commits // 20, 1) == 0:
                traced, _ = tracemalloc.get_traced_memory()
                m = maintenance.metrics
                print(
                    f"{b + 1:6d} commits  {time.perf_counter() - started:6.0f} s  "
                    f"rss {rss_mb():6.1f} MB  traced {traced / 2**20:6.1f} MB  "
                    f"arrow {pa.total_allocated_bytes() / 2**20:6.1f} MB  "
                    f"maintenance {m.runs} runs {m.failures} failed",
                    flush=True,
                )
                if first is None:
                    maintenance.wait()
                    first = tracemalloc.take_snapshot()
        maintenance.wait()
        last = tracemalloc.take_snapshot()
        committer.close()
        assert first is not None
        print(f"\nlargest growth, commit {a.commits // 20} -> {a.commits}:")
        for stat in last.compare_to(first, "lineno")[: a.top]:
            print(f"  {stat}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
