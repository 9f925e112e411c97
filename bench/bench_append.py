"""``table.append`` throughput and commit latency over many appends.

Run: ``python bench/bench_append.py [rows] [small_appends] [runs]`` (defaults 2,000,000, 1,000, 5).

1. Throughput: one ``table.append`` of ``rows`` rows (int64 id, timestamp, 8-value
   string, double, 40-byte string payload), unpartitioned, against
   ``pyarrow.parquet.write_table`` of the same table with the same codec (zstd, the
   Iceberg default) and against pyiceberg's ``append`` (same codec). Best of ``runs``.
2. Latency: ``small_appends`` successive appends of 10 rows to one table, with merge
   append (the default) and with fast append (every manifest kept); median latency
   of the last 10 against the first 10.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.catalogs import load_catalog
from stream_sink.table.manifest import read_manifest_list
from stream_sink.table.table import Table

CODEC = "zstd"


def make_rows(n: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    categories = np.array([f"category-{i}" for i in range(8)], dtype=object)
    payload = rng.integers(0, 2**62, size=(n,)).astype(str)
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "ts": pa.array(
                (1_700_000_000_000_000 + rng.integers(0, 10**12, n)).astype("datetime64[us]")
            ),
            "category": pa.array(categories[rng.integers(0, 8, n)]),
            "value": pa.array(rng.random(n)),
            "payload": pa.array(np.char.ljust(payload, 40, "x").astype(object)),
        }
    )


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process)."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def throughput(data: pa.Table, root: Path, runs: int) -> None:
    """Each repetition runs the three writers back to back; the best run of each counts
    (the machine is shared, so the minimum is the least disturbed measurement)."""
    catalog = load_catalog("bench", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    theirs_catalog = pyiceberg_catalog(root)
    times: dict[str, list[tuple[float, float]]] = {"raw": [], "ours": [], "pyiceberg": []}
    for i in range(runs):
        path = root / f"raw-{i}.parquet"
        times["raw"].append(timed(partial(pq.write_table, data, path, compression=CODEC)))
        ours = catalog.create_table(f"db.t{i}", data.schema)
        times["ours"].append(timed(partial(ours.append, data)))
        if theirs_catalog is not None:
            props = {"write.parquet.compression-codec": CODEC}
            theirs = theirs_catalog.create_table(f"db.t{i}", data.schema, properties=props)
            times["pyiceberg"].append(timed(partial(theirs.append, data)))
    raw_wall, raw_cpu = (min(t[i] for t in times["raw"]) for i in (0, 1))
    print(
        f"rows: {data.num_rows:,}  arrow size: {data.nbytes / 2**20:.0f} MiB  codec: {CODEC}"
        f"  best of {runs} (wall and CPU seconds; CPU is the fair figure on a busy machine)"
    )
    print(f"  pyarrow.parquet.write_table  wall {raw_wall:6.2f} s  cpu {raw_cpu:6.2f} s")
    for name, label, goal in (
        ("ours", "stream_sink table.append   ", "  (goal >= 0.90x)"),
        ("pyiceberg", "pyiceberg table.append     ", ""),
    ):
        if times[name]:
            wall, cpu = (min(t[i] for t in times[name]) for i in (0, 1))
            print(
                f"  {label}  wall {wall:6.2f} s  cpu {cpu:6.2f} s"
                f"  ratio wall {raw_wall / wall:.2f}x  cpu {raw_cpu / cpu:.2f}x{goal}"
            )


def pyiceberg_catalog(root: Path) -> Any:
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ImportError:
        print("  pyiceberg not installed: skipped")
        return None
    catalog = SqlCatalog(
        "bench", uri=f"sqlite:///{root}/pyiceberg.db", warehouse=f"file://{root}/pyiceberg-wh"
    )
    catalog.create_namespace("db")
    return catalog


def latency(appends: int, root: Path) -> None:
    """Both append flavours: merge append (the default, Java's newAppend) and fast append
    (``commit.manifest-merge.enabled=false``, every manifest kept)."""
    catalog = load_catalog("lat", type="hadoop", warehouse=str(root / "lat-wh"))
    catalog.create_namespace("db")
    small = make_rows(10)
    for label, merge in (("merge append (default)", "true"), ("fast append", "false")):
        props = {"commit.manifest-merge.enabled": merge}
        table = catalog.create_table(f"db.small_{merge}", small.schema, properties=props)
        times = [timed(partial(table.append, small))[0] for _ in range(appends)]
        first, last = statistics.median(times[:10]), statistics.median(times[-10:])
        print(
            f"{appends} appends of 10 rows, {label}: median first 10 {first * 1000:.1f} ms,"
            f" last 10 {last * 1000:.1f} ms, ratio {last / first:.2f}x (goal <= 1.5x);"
            f" manifests in the last snapshot: {_manifest_count(table)}"
        )


def _manifest_count(table: Table) -> int:
    snap = table.current_snapshot()
    return len(read_manifest_list(table.io, snap.manifest_list)) if snap else 0


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    appends = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    data = make_rows(rows)
    with tempfile.TemporaryDirectory(prefix="bench-append-") as tmp:
        throughput(data, Path(tmp), runs)
        if appends >= 20:
            latency(appends, Path(tmp))


if __name__ == "__main__":
    main()
