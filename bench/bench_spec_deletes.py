"""Read cost of global equality deletes (what a row delta writes while data files of an
older partition spec are live) against partitioned ones (one spec only).

Run: ``python bench/bench_spec_deletes.py [rows] [batches] [buckets]`` (defaults 200,000,
10 and 16). Two tables get the same ``rows`` keys appended, then ``batches`` upserts of
``rows / 20`` distinct random keys each (equality deletes, no position deletes):

- ``partitioned``: created ``bucket(buckets, id)``; each upsert's deletes are partitioned,
  so a data file sees only the delete files of its bucket;
- ``global``: created unpartitioned with one extra row (id -1), then given the same
  ``bucket(buckets, id)`` spec before the rows: that older file stays live, so every
  upsert's deletes are registered under the unpartitioned spec and a data file sees
  every delete file (key bounds cannot prune random keys).

Both read the same rows (the extra one aside). Printed per reader (ours:
``table.scan().to_arrow()``; DuckDB 1.5.5: ``SELECT count(*), sum(id) FROM
iceberg_scan(...)``): the median of ``ROUNDS`` alternating rounds, the ratio
global/partitioned, and the peak RSS of a fresh process that imports the reader and
reads once.
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

from stream_sink.catalogs import load_catalog
from stream_sink.table.transforms import Bucket

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
ROUNDS = 5


def _rows(ids: np.ndarray, tag: str) -> pa.Table:
    data = np.char.add(f"{tag}-", ids.astype(str)).astype(object)
    return pa.table({"id": pa.array(ids, pa.int64()), "data": pa.array(data)}, schema=SCHEMA)


def build(root: str, name: str, rows: int, batches: int, buckets: int) -> str:
    catalog = load_catalog(name, type="hadoop", warehouse=os.path.join(root, name))
    catalog.create_namespace("db")
    if name == "partitioned":
        table: Any = catalog.create_table(
            "db.t", SCHEMA, [("bucket", "id", buckets)], identifier_fields=["id"]
        )
    else:
        table = catalog.create_table("db.t", SCHEMA, identifier_fields=["id"])
        table.append(_rows(np.array([-1]), "old"))
        with table.update_spec() as u:
            u.add_field("id", Bucket(buckets), "id_bucket")
    table.append(_rows(np.arange(rows), "v0"))
    rng = np.random.default_rng(7)
    for b in range(batches):
        keys = rng.choice(rows, size=rows // 20, replace=False)
        table.upsert(_rows(np.sort(keys), f"v{b + 1}"))
    return str(table.refresh().metadata_location)


def read_ours(location: str) -> int:
    from stream_sink.catalogs import load_catalog as _load

    warehouse = location.split("/db/t/metadata/")[0]
    table: Any = _load("r", type="hadoop", warehouse=warehouse).load_table("db.t")
    return int(table.scan().to_arrow().num_rows)


def read_duckdb(location: str) -> int:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from readers import duckdb_connection

    con = duckdb_connection()
    try:
        row = con.execute(f"SELECT count(*), sum(id) FROM iceberg_scan('{location}')").fetchone()
        assert row is not None
        return int(row[0])
    finally:
        con.close()


READERS: dict[str, Callable[[str], int]] = {"ours": read_ours, "duckdb": read_duckdb}


def _peak_child(reader: str, location: str, out: Any) -> None:
    READERS[reader](location)
    out.put(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def peak_mib(reader: str, location: str) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_peak_child, args=(reader, location, q))
    p.start()
    kib = q.get(timeout=1800)
    p.join()
    return float(kib) / 1024


def main() -> None:
    args = [int(a) for a in sys.argv[1:]]
    rows, batches, buckets = (args + [200_000, 10, 16][len(args) :])[:3]
    with tempfile.TemporaryDirectory(prefix="bench-spec-deletes-") as root:
        started = time.perf_counter()
        tables = {n: build(root, n, rows, batches, buckets) for n in ("partitioned", "global")}
        print(
            f"rows={rows} upserts={batches} x {rows // 20} keys, bucket({buckets}); "
            f"built in {time.perf_counter() - started:.1f} s"
        )
        for reader, read in READERS.items():
            counts = {n: read(loc) for n, loc in tables.items()}  # warm up, check
            assert counts["global"] == counts["partitioned"] + 1, counts
            times: dict[str, list[float]] = {n: [] for n in tables}
            for _ in range(ROUNDS):
                for n, loc in tables.items():
                    t0 = time.perf_counter()
                    read(loc)
                    times[n].append(time.perf_counter() - t0)
            med = {n: statistics.median(ts) for n, ts in times.items()}
            peaks = {n: peak_mib(reader, loc) for n, loc in tables.items()}
            print(
                f"{reader:7s} partitioned {med['partitioned'] * 1000:8.0f} ms "
                f"(peak {peaks['partitioned']:.0f} MiB)  global {med['global'] * 1000:8.0f} ms "
                f"(peak {peaks['global']:.0f} MiB)  ratio global/partitioned "
                f"{med['global'] / med['partitioned']:.2f}x"
            )


if __name__ == "__main__":
    main()
