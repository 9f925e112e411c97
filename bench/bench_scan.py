"""Scan with equality deletes: our ``TableScan.to_arrow`` against DuckDB's ``iceberg_scan``.

Run: ``python bench/bench_scan.py [rows] [deleted_keys] [delete_commits] [append_commits]
[--duckdb-timeout=S]`` (defaults 1,000,000, 100,000, 20, 10 and 600 s). The table
(id, data, value, ts; key ``id``) gets ``rows`` rows in ``append_commits`` appends,
then ``deleted_keys`` distinct random keys deleted through the upsert CDC writer
(``-D`` rows: equality deletes) in ``delete_commits`` row deltas, so every data file
has every delete file applied.

Times are the medians of ``ROUNDS`` rounds in which the readers take turns (other load
on the machine hits all alike; the best round is printed too); peak memory is measured
in a fresh process per reader (RSS growth over one read). All read the same metadata
file: ours with ``table.scan().to_arrow()`` and ``to_reader()`` (streamed, batches
dropped); DuckDB with ``SELECT * FROM iceberg_scan(...)`` fetched as an Arrow table (one
run, stopped after the timeout: DuckDB 1.5.5 applies equality deletes in time that grows
with rows times deleted keys, about 200 s at 300,000 rows and 30,000 keys on two cores);
and, as a second baseline, DuckDB reading the same Parquet files with a hash anti-join
on the key. Row counts must agree.

Filtered reads (``id < rows / 20``, the first 5% of the keys) compare our scan, which
skips files and row groups by their statistics (the table writes row groups of
``ROW_GROUP_BYTES``), with the same DuckDB anti-join plus ``WHERE`` (DuckDB prunes row
groups by statistics too).
"""

from __future__ import annotations

import glob
import importlib
import multiprocessing as mp
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from queue import Empty
from typing import Any

import numpy as np
import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("data", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("ts", pa.timestamp("us")),
    ]
)
ROUNDS = 15
ROW_GROUP_BYTES = 1 << 20
FILTER_BOUND = [0]


def _rows(ids: np.ndarray) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "data": pa.array(np.char.add("row-", ids.astype(str)).astype(object)),
            "value": pa.array(ids * 0.25),
            "ts": pa.array(1_700_000_000_000_000 + ids * 1_000_000, pa.int64()).cast(
                pa.timestamp("us")
            ),
        },
        schema=SCHEMA,
    )


def build(root: str, rows: int, deleted: int, delete_commits: int, appends: int) -> str:
    """The table; returns its metadata location."""
    catalog = load_catalog("bench", type="hadoop", warehouse=os.path.join(root, "wh"))
    catalog.create_namespace("db")
    table: Any = catalog.create_table(
        "db.t",
        schema=SCHEMA,
        identifier_fields=["id"],
        properties={"write.parquet.row-group-size-bytes": str(ROW_GROUP_BYTES)},
    )
    for chunk in np.array_split(np.arange(rows, dtype=np.int64), appends):
        table.append(_rows(chunk))
    victims = np.random.default_rng(7).choice(rows, size=deleted, replace=False)
    for chunk in np.array_split(victims, delete_commits):
        batch = _rows(np.sort(chunk))
        batch = batch.add_column(0, "_row_kind", pa.array(["-D"] * len(chunk), pa.string()))
        factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
        writer = factory.create(partition_id=0, task_id=0)
        writer.write(batch)
        commit_write_result(table, writer.complete())
    return table.metadata_location


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(read: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    rows = read()
    return time.perf_counter() - start, rows


def _memory(kind: str, location: str, out: mp.Queue) -> None:
    """One run of ``kind`` in this fresh process: (seconds, rows, peak RSS growth MB)."""
    base = _rss_mb()
    seconds, rows = _timed(READERS[kind](location))
    out.put((seconds, rows, _rss_mb() - base))


def _times(kinds: list[str], location: str, rounds: int, out: mp.Queue) -> None:
    """Every round's wall time of each of ``kinds``, run round-robin so load from other
    processes hits all of them alike (one untimed warm-up round first)."""
    readers = {k: READERS[k](location) for k in kinds}
    for read in readers.values():
        read()
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(rounds):
        for k, read in readers.items():
            times[k].append(_timed(read)[0])
    out.put(times)


def _ours(location: str) -> Callable[[], int]:
    table = _load(location)
    return lambda: table.scan().to_arrow().num_rows


def _ours_streamed(location: str) -> Callable[[], int]:
    table = _load(location)
    return lambda: sum(b.num_rows for b in table.scan().to_reader())


def _ours_filtered(location: str) -> Callable[[], int]:
    from stream_sink.read import col

    table, bound = _load(location), _filter_bound(location)
    return lambda: table.scan(row_filter=col("id") < bound).to_arrow().num_rows


def _filter_bound(location: str) -> int:
    """``id`` bound of the filtered reads (set by ``main``; readers run in forked processes)."""
    return FILTER_BOUND[0]


def _load(location: str) -> Any:
    root = location.split("/wh/")[0]
    catalog = load_catalog("bench", type="hadoop", warehouse=os.path.join(root, "wh"))
    return catalog.load_table("db.t")


def _duckdb_connection() -> Any:
    import duckdb

    con = duckdb.connect()
    for package in ("duckdb_extension_avro", "duckdb_extension_iceberg"):
        root = os.path.dirname(importlib.import_module(package).__file__ or "")
        ext = sorted(glob.glob(os.path.join(root, "**", "*.duckdb_extension"), recursive=True))
        con.execute(f"LOAD '{ext[-1]}'")
    return con


def _duckdb_iceberg_scan(location: str) -> Callable[[], int]:
    con = _duckdb_connection()
    sql = f"SELECT * FROM iceberg_scan('{location}')"
    return lambda: con.execute(sql).to_arrow_table().num_rows


def _duckdb_anti_join(location: str, where: str = "") -> Callable[[], int]:
    """DuckDB over the same Parquet files, deletes applied by a hash anti-join on ``id``.
    Equivalent here only because every delete file is newer than every data file;
    the file lists come from DuckDB's own ``iceberg_metadata``."""
    con = _duckdb_connection()
    files = con.execute(f"SELECT content, file_path FROM iceberg_metadata('{location}')").fetchall()
    data = [p for c, p in files if c != "EQUALITY_DELETES"]
    deletes = [p for c, p in files if c == "EQUALITY_DELETES"]
    sql = (
        f"SELECT d.* FROM read_parquet({data!r}) d "
        f"ANTI JOIN read_parquet({deletes!r}) x ON d.id = x.id {where}"
    )
    return lambda: con.execute(sql).to_arrow_table().num_rows


def _duckdb_anti_join_filtered(location: str) -> Callable[[], int]:
    return _duckdb_anti_join(location, f"WHERE d.id < {_filter_bound(location)}")


READERS: dict[str, Callable[[str], Callable[[], int]]] = {
    "ours to_arrow": _ours,
    "ours to_reader": _ours_streamed,
    "duckdb anti-join": _duckdb_anti_join,
    "ours filtered": _ours_filtered,
    "duckdb filtered": _duckdb_anti_join_filtered,
    "duckdb iceberg_scan": _duckdb_iceberg_scan,
}


def _in_process(target: Callable[..., None], args: tuple[Any, ...], timeout: float) -> Any:
    """What ``target(*args, queue)`` puts on the queue, run in a fresh process; None
    when it takes longer than ``timeout`` seconds (the process is killed)."""
    ctx = mp.get_context("fork")
    queue: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    try:
        return queue.get(timeout=timeout)
    except Empty:
        proc.kill()
        return None
    finally:
        proc.join()


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    timeout = float(
        next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--duckdb-timeout=")), 600)
    )
    numbers = [int(a) for a in args] + [1_000_000, 100_000, 20, 10][len(args) :]
    rows, deleted, delete_commits, appends = numbers[:4]
    expected = rows - deleted
    fast = [
        "ours to_arrow",
        "ours to_reader",
        "duckdb anti-join",
        "ours filtered",
        "duckdb filtered",
    ]
    FILTER_BOUND[0] = rows // 20
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        location = build(root, rows, deleted, delete_commits, appends)
        print(
            f"table: {rows:,} rows in {appends} appends, {deleted:,} keys equality-deleted "
            f"in {delete_commits} commits (built in {time.perf_counter() - start:.1f} s)",
            flush=True,
        )
        times = _in_process(_times, (fast, location, ROUNDS), 3600)
        median = {k: statistics.median(v) for k, v in times.items()}
        counts = {}
        for kind in fast:
            seconds, count, peak = _in_process(_memory, (kind, location), 3600)
            counts[kind] = count
            want = counts.get("duckdb anti-join", expected)
            if "filtered" in kind:
                want = counts.get("ours filtered", count)  # both filtered reads must agree
            status = "ok" if count == want else f"WRONG (expected {want:,})"
            print(
                f"{kind:20s} {median[kind] * 1000:9.1f} ms median of {ROUNDS}"
                f" (best {min(times[kind]) * 1000:.1f})  {count:>10,} rows "
                f"{status}  peak RSS +{peak:.0f} MB",
                flush=True,
            )
        iceberg_scan = _in_process(_memory, ("duckdb iceberg_scan", location), timeout)
    if iceberg_scan is None:
        print(f"{'duckdb iceberg_scan':20s} > {timeout:.0f} s (stopped)")
        ratio = f"< {median['ours to_arrow'] / timeout:.4f}x"
    else:
        seconds, count, peak = iceberg_scan
        status = "ok" if count == expected else f"WRONG (expected {expected:,})"
        print(
            f"{'duckdb iceberg_scan':20s} {seconds * 1000:9.0f} ms (1 run)  {count:>10,} rows "
            f"{status}  peak RSS +{peak:.0f} MB"
        )
        ratio = f"{median['ours to_arrow'] / seconds:.2g}x"
    print(f"ours to_arrow / duckdb iceberg_scan: {ratio} (goal <= 1.5x)")
    anti = median["duckdb anti-join"] / median["ours to_arrow"]
    print(f"duckdb anti-join / ours to_arrow (median time): {anti:.2f}x (goal >= 1.0x)")
    filtered = median["duckdb filtered"] / median["ours filtered"]
    print(f"duckdb filtered / ours filtered (median time):  {filtered:.2f}x (goal >= 1.0x)")
    print(f"load average while measuring: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
