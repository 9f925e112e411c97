"""Copy-on-write MERGE with deletion vectors against whole-file rewrites.

Run: ``python bench/bench_delta_deletion_vectors.py [files] [rows_per_file] [rounds]``
(defaults 4, 250,000, 3). No Spark. For each fraction of every file's rows an upsert
batch updates (0.1%, 1%, 10%, 30%, 49%), two tables of the same rows, one with
``delta.enableDeletionVectors`` (the MERGE writes a deletion vector per file) and one
without (the MERGE rewrites each file), get the same batch (vectors are written at
every fraction here, past the MERGE's own ``DV_MAX_DELETED_FRACTION``); each MERGE runs
in a fresh process (so peak memory, RSS growth, is its own), then in the same process a
full read of the table after it, which pays for the vectors. Medians of ``rounds``;
ratios are rewrite time over deletion vector time (above 1: the vectors are faster).
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import statistics
import sys
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa

from stream_sink.delta import DeltaTable
from stream_sink.delta import merge as merge_module
from stream_sink.delta.merge import copy_on_write

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("data", pa.string()), ("value", pa.float64())]
)
FRACTIONS = (0.001, 0.01, 0.1, 0.3, 0.49)


def _rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {"id": ids, "data": pa.array([f"row-{i}" for i in ids]), "value": ids * 0.5},
        schema=SCHEMA,
    )


def build(root: str, files: int, rows: int, dvs: bool) -> None:
    config = {"delta.enableDeletionVectors": "true"} if dvs else {}
    table = DeltaTable.create(root, SCHEMA, configuration=config)
    for f in range(files):
        table.append(_rows(f * rows, rows))


def merge(root: str, files: int, rows: int, fraction: float) -> None:
    merge_module.DV_MAX_DELETED_FRACTION = 1.0  # vectors at every fraction, to compare
    rng = np.random.default_rng(11)
    per_file = max(1, int(rows * fraction))
    ids = np.concatenate(
        [f * rows + rng.choice(rows, per_file, replace=False) for f in range(files)]
    )
    changes = _rows(0, len(ids)).set_column(0, "id", pa.array(ids, pa.int64()))
    table = DeltaTable.load(root)
    batch = copy_on_write(table.snapshot, table.io, changes, ["id"], "upsert")
    txn = table.new_transaction().add_all(batch.adds).add_all(batch.removes)
    txn.read_files(r.path for r in batch.removes).commit("MERGE")


def merge_then_read(root: str, files: int, rows: int, fraction: float) -> tuple[float, int]:
    """The MERGE (timed by the caller), then a full read of the table after it, timed
    here (warm: the same process just ran the MERGE); returns (read seconds, rows)."""
    merge(root, files, rows, fraction)
    start = time.perf_counter()
    n = DeltaTable.load(root).to_arrow().num_rows
    return time.perf_counter() - start, n


def _child(fn: Any, args: tuple[Any, ...], queue: Any) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    value = fn(*args)
    elapsed = time.perf_counter() - start
    queue.put(
        (elapsed, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024, value)
    )


def measure(fn: Any, *args: Any) -> tuple[float, int, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_child, args=(fn, args, queue))
    p.start()
    out = queue.get()
    p.join()
    return out  # type: ignore[no-any-return]


def main(files: int, rows: int, rounds: int) -> None:
    print(f"{files} files x {rows:,} rows; medians of {rounds} rounds")
    for fraction in FRACTIONS:
        results: dict[bool, list[tuple[float, int, float]]] = {True: [], False: []}
        for _ in range(rounds):
            for dvs in (False, True):
                with tempfile.TemporaryDirectory() as root:
                    measure(build, root, files, rows, dvs)
                    total, peak, (r, n) = measure(merge_then_read, root, files, rows, fraction)
                    assert n == files * rows, n
                    m = total - r
                    results[dvs].append((m, peak, r))
        med = {
            k: tuple(statistics.median(x[i] for x in v) for i in range(3))
            for k, v in results.items()
        }
        (rw_m, rw_peak, rw_r), (dv_m, dv_peak, dv_r) = med[False], med[True]
        print(
            f"{fraction:6.1%} of each file updated: MERGE rewrite {rw_m:6.2f}s "
            f"(+{rw_peak / 2**20:4.0f} MiB) vs deletion vectors {dv_m:6.2f}s "
            f"(+{dv_peak / 2**20:4.0f} MiB) = {rw_m / dv_m:5.2f}x; "
            f"read after {rw_r:5.2f}s vs {dv_r:5.2f}s = {rw_r / dv_r:5.2f}x"
        )


if __name__ == "__main__":
    a = [int(x) for x in sys.argv[1:]]
    main(a[0] if a else 4, a[1] if len(a) > 1 else 250_000, a[2] if len(a) > 2 else 3)
