"""Deletes of a CDC table on format version 2 and 3: read cost and size after 30 upserts,
and the CDC writer writing deletion vectors against position-delete files.

Run: ``python bench/bench_v3_deletes.py [rows] [batches]`` (defaults 20,000 and 30: DuckDB
1.5's read of the equality-delete table grows with rows times deleted keys, over a
minute per read already at these sizes).
Three tables get the same ``rows`` keys appended, then ``batches`` upserts of
``rows / 50`` random existing keys (equality deletes) plus ``rows / 200`` keys written
twice in the batch (deleted by position: a position-delete file on v2, a deletion
vector on v3):

- ``equality (v2)``: as written;
- ``positions (v2)``: after ``convert_equality_deletes`` (position-delete files);
- ``vectors (v3)``: a v3 table after ``convert_equality_deletes`` (deletion vectors).

Printed per table: live delete files and their bytes, and the median of ``ROUNDS``
reads by ours (``scan().to_arrow()``) and DuckDB (``count(*)``), with the ratio to the
equality table. Then the CDC writer alone (no commit): rows/s writing one batch of
``rows`` upserts whose every key comes twice (``rows / 2`` position deletes), v2 files
against v3 vectors. Last, the peak RSS of the process.
"""

from __future__ import annotations

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
from stream_sink.maintenance.inventory import inventory
from stream_sink.table.manifest import DataFileContent
from stream_sink.table.table import Table
from stream_sink.write.task_writers import write_through
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
ROUNDS = 3
POSITION_DELETES = DataFileContent.POSITION_DELETES


def rows_of(ids: np.ndarray, tag: str) -> pa.Table:
    values = np.char.add(f"{tag}-", ids.astype(str)).astype(object)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(values)}, schema=SCHEMA)


def build(root: str, name: str, version: int, rows: int, batches: int, convert: bool) -> Table:
    catalog = load_catalog(name, type="hadoop", warehouse=os.path.join(root, name))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", SCHEMA, identifier_fields=["id"], format_version=version)
    t.append(rows_of(np.arange(rows), "base"))
    rng = np.random.default_rng(7)
    for b in range(batches):
        updated = rng.choice(rows, rows // 50, replace=False)
        twice = rng.choice(rows, rows // 200, replace=False)
        t.upsert(rows_of(np.concatenate([updated, twice, twice]), f"b{b}"))
    if convert:
        t.maintenance.convert_equality_deletes()
    return t


def delete_bytes(t: Table) -> tuple[int, int]:
    """(live delete entries, bytes of the distinct files holding them)."""
    deletes = [e.data_file for e in inventory(t.refresh(), t.current_snapshot()).deletes]
    sizes = {d.file_path: d.file_size_in_bytes for d in deletes}
    return len(deletes), sum(sizes.values())


def median_s(read: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        read()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def duckdb_connection() -> Any:
    """DuckDB with its iceberg extension loaded (as the tests load it: no network)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from readers import duckdb_connection as connect

    return connect()


def duckdb_count(con: Any, location: str) -> int:
    row = con.execute(f"SELECT count(*) FROM iceberg_scan('{location}')").fetchone()
    return int(row[0])


def writer_rate(root: str, version: int, rows: int) -> float:
    catalog = load_catalog(
        f"w{version}", type="hadoop", warehouse=os.path.join(root, f"w{version}")
    )
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", SCHEMA, identifier_fields=["id"], format_version=version)
    ids = np.arange(rows // 2)
    batch = rows_of(np.concatenate([ids, ids]), "w").append_column(
        "_row_kind", pa.array(["+I"] * rows)
    )
    factory = TaskWriterFactory.for_table(t, equality_fields=["id"], upsert=True)
    times = []
    for i in range(ROUNDS):
        writer = factory.create(0, i)
        start = time.perf_counter()
        result = write_through(writer, [batch])
        times.append(time.perf_counter() - start)
        by_position = [f for f in result.delete_files if f.content == POSITION_DELETES]
        assert sum(f.record_count for f in by_position) == rows // 2
        writer.abort()
    return rows / statistics.median(times)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    batches = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with tempfile.TemporaryDirectory(prefix="bench-v3-") as root:
        tables = {
            "equality (v2)": build(root, "eq", 2, rows, batches, convert=False),
            "positions (v2)": build(root, "pos", 2, rows, batches, convert=True),
            "vectors (v3)": build(root, "dv", 3, rows, batches, convert=True),
        }
        base: dict[str, float] = {}
        con = duckdb_connection()
        print(f"{rows} rows, {batches} upsert batches; median of {ROUNDS} reads")
        header = ("table", "deletes", "bytes", "ours s", "x", "DuckDB s", "x")
        print("{:16} {:>8} {:>10} {:>8} {:>5} {:>9} {:>5}".format(*header))
        for name, t in tables.items():
            count, size = delete_bytes(t)
            n = len(t.scan().to_arrow())
            assert n == rows and duckdb_count(con, t.metadata_location) == rows
            ours = median_s(lambda t=t: t.scan().to_arrow())
            duck = median_s(lambda t=t: duckdb_count(con, t.metadata_location))
            base.setdefault("ours", ours)
            base.setdefault("duck", duck)
            print(
                f"{name:16} {count:>8} {size:>10} {ours:>8.3f} {ours / base['ours']:>5.2f} "
                f"{duck:>9.3f} {duck / base['duck']:>5.2f}"
            )
        v2, v3 = writer_rate(root, 2, rows), writer_rate(root, 3, rows)
        print(f"CDC writer, {rows} upserts with {rows // 2} deleted by position:")
        print(f"  position-delete files (v2): {v2:,.0f} rows/s")
        print(f"  deletion vectors (v3):      {v3:,.0f} rows/s  ({v3 / v2:.2f}x)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")


if __name__ == "__main__":
    main()
