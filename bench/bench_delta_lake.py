"""Delta Lake target: append stream rows/s and upsert batch latency, with peak memory.

Run: ``python bench/bench_delta_lake.py [batches] [batch_rows] [upsert_batches] [changes]``
(defaults 20, 50,000, 10, 5,000). No Spark: each variant runs the sink's driver path
(write the batch's files, ``process``, ``snapshot_state``, ``complete_checkpoint``,
``notify_checkpoint_complete``, one checkpoint per batch) in a fresh process, so peak
memory (RSS growth) belongs to it alone.

1. Append: the same batches (built before timing) into Delta (DeltaTarget) and into
   Iceberg (IcebergTarget, the append TaskWriter), ``DeltaTable.append`` (our log and
   writer without the protocol's state and checkpoints), and
   ``deltalake.write_deltalake(mode="append")`` (delta-rs) as the baseline.
2. Upsert: a 200,000-row table, then batches of changes (90% updates of existing keys,
   10% new keys): our copy-on-write MERGE + commit against delta-rs ``merge`` (when
   matched update all, when not matched insert all) of the same changes; median batch
   latency.
Ratios are against the delta-rs baseline measured in the same run.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("data", pa.string()), ("value", pa.float64())]
)
BASE_ROWS = 200_000


def batch(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {"id": ids, "data": pa.array([f"row-{i}" for i in ids]), "value": rng.random(n)},
        schema=SCHEMA,
    )


def changes(i: int, n: int) -> pa.Table:
    rng = np.random.default_rng(100 + i)
    updates = rng.choice(BASE_ROWS, size=int(n * 0.9), replace=False).astype(np.int64)
    inserts = np.arange(BASE_ROWS + i * n, BASE_ROWS + i * n + (n - len(updates)), dtype=np.int64)
    ids = np.concatenate([updates, inserts])
    return pa.table(
        {"id": ids, "data": pa.array([f"v{i}-{k}" for k in ids]), "value": rng.random(len(ids))},
        schema=SCHEMA,
    )


def _committer(target: Any, root: str) -> Any:
    from stream_sink.checkpoints import CheckpointStorage
    from stream_sink.commit import FilesCommitter, StateDirectory

    state = StateDirectory(f"{root}/state", kind="rocksdb")
    storage = CheckpointStorage(f"{root}/chk", "s")
    c = FilesCommitter(target, state, storage, job_id="bench", operator_id="s")
    c.restore()
    return c


def _commit(c: Any, batch_id: int, result: Any) -> None:
    c.process(batch_id, result)
    c.snapshot_state(batch_id)
    c.complete_checkpoint(batch_id)
    c.notify_checkpoint_complete(batch_id)


def make_batches(batches: int, rows: int) -> list[pa.Table]:
    return [batch(b * rows, rows, b) for b in range(batches)]


def append_delta(root: str, data: list[pa.Table]) -> None:
    from stream_sink.commit.delta.target import DeltaTarget
    from stream_sink.delta import DeltaTable
    from stream_sink.delta.batch import DeltaBatch
    from stream_sink.delta.writer import write_data_files

    table = DeltaTable.create(f"{root}/t", SCHEMA)
    c = _committer(DeltaTarget(table), root)
    for b, rows in enumerate(data):
        adds = write_data_files(table.location, rows, table.schema, ())
        _commit(c, b, DeltaBatch(tuple(adds)))
    c.close()


def append_delta_plain(root: str, data: list[pa.Table]) -> None:
    from stream_sink.delta import DeltaTable

    table = DeltaTable.create(f"{root}/t", SCHEMA)
    for rows in data:
        table.append(rows)


def append_iceberg(root: str, data: list[pa.Table]) -> None:
    from stream_sink.catalogs import load_catalog
    from stream_sink.commit import IcebergTarget
    from stream_sink.write.writer_factory import TaskWriterFactory

    catalog = load_catalog("b", type="hadoop", warehouse=f"{root}/wh")
    catalog.create_namespace("db")
    props = {"write.parquet.compression-codec": "snappy"}  # the Delta writers' codec
    table = catalog.create_table("db.t", schema=SCHEMA, properties=props)
    c = _committer(IcebergTarget(table), root)
    for b, rows in enumerate(data):
        writer = TaskWriterFactory.for_table(table).create(0, b)
        writer.write(rows)
        _commit(c, b, writer.complete())
    c.close()


def append_delta_rs(root: str, data: list[pa.Table]) -> None:
    from deltalake import write_deltalake

    for rows in data:
        write_deltalake(f"{root}/t", rows, mode="append")


def _base(root: str) -> None:
    from stream_sink.delta import DeltaTable

    table = DeltaTable.create(f"{root}/t", SCHEMA)
    for i in range(10):
        table.append(batch(i * BASE_ROWS // 10, BASE_ROWS // 10, i))


def upsert_ours(root: str, batches: int, n: int) -> list[float]:
    from stream_sink.commit.delta.target import DeltaTarget
    from stream_sink.delta import DeltaTable
    from stream_sink.delta.merge import copy_on_write

    _base(root)
    table = DeltaTable.load(f"{root}/t")
    c = _committer(DeltaTarget(table), root)
    out = []
    for i in range(batches):
        data = changes(i, n)
        t0 = time.perf_counter()
        result = copy_on_write(table.refresh().snapshot, table.io, data, ["id"], "upsert")
        _commit(c, i, result)
        out.append(time.perf_counter() - t0)
    c.close()
    return out


def upsert_delta_rs(root: str, batches: int, n: int) -> list[float]:
    from deltalake import DeltaTable

    _base(root)
    out = []
    for i in range(batches):
        data = changes(i, n)
        t0 = time.perf_counter()
        (
            DeltaTable(f"{root}/t")
            .merge(data, predicate="t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        out.append(time.perf_counter() - t0)
    return out


def _child(fn: Callable[..., Any], args: tuple[Any, ...], queue: Any) -> None:
    """Run ``fn(root, *inputs)``; append variants get their batches built before timing."""
    import deltalake  # noqa: F401  imports are not part of the measurement

    import stream_sink.commit.delta.target
    import stream_sink.write.task_writers  # noqa: F401

    inputs = (make_batches(*args),) if fn.__name__.startswith("append") else args
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with tempfile.TemporaryDirectory() as root:
        t0 = time.perf_counter()
        value = fn(root, *inputs)
        elapsed = time.perf_counter() - t0
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    queue.put((elapsed, peak, value))


def measure(fn: Callable[..., Any], *args: Any) -> tuple[float, int, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result  # type: ignore[no-any-return]


def main(batches: int, rows: int, upsert_batches: int, n: int) -> None:
    total = batches * rows
    print(
        f"append: {batches} batches x {rows:,} rows, one checkpoint per batch (cpus: "
        f"{os.cpu_count()}, load {os.getloadavg()[0]:.1f})"
    )
    base, base_peak, _ = measure(append_delta_rs, batches, rows)
    for name, fn in (
        ("deltalake.write_deltalake", append_delta_rs),
        ("DeltaTable.append (no sink)", append_delta_plain),
        ("stream_sink -> Delta", append_delta),
        ("stream_sink -> Iceberg", append_iceberg),
    ):
        if fn is append_delta_rs:
            elapsed, peak = base, base_peak
        else:
            elapsed, peak, _ = measure(fn, batches, rows)
        print(
            f"  {name:28s} {total / elapsed:12,.0f} rows/s  {base / elapsed:5.2f}x  "
            f"peak +{peak / 2**20:6.0f} MiB"
        )
    print(f"upsert: {upsert_batches} batches of {n:,} changes into {BASE_ROWS:,} rows in 10 files")
    _, rs_peak, rs = measure(upsert_delta_rs, upsert_batches, n)
    _, our_peak, ours = measure(upsert_ours, upsert_batches, n)
    rs_med, our_med = statistics.median(rs), statistics.median(ours)
    print(
        f"  delta-rs merge               median {rs_med * 1000:8.1f} ms  1.00x  "
        f"peak +{rs_peak / 2**20:6.0f} MiB"
    )
    print(
        f"  stream_sink CoW MERGE+commit median {our_med * 1000:8.1f} ms  "
        f"{rs_med / our_med:4.2f}x  peak +{our_peak / 2**20:6.0f} MiB"
    )


if __name__ == "__main__":
    a = [int(x) for x in sys.argv[1:]]
    main(*(a + [20, 50_000, 10, 5_000][len(a) :]))
