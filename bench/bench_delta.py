"""Upsert CDC writer on a CDC stream: rows/s and peak memory.

Run: ``python bench/bench_delta.py [rows] [batch_rows] [rows_per_task] [--baseline REV]``
(defaults 1,000,000, 10,000, all rows in one task, and ``bf56fbc~1``; ``--rounds``
interleaved rounds, default 3, medians). The stream is
88% inserts of new ids (so about 0.86 x rows keys are live at the end),
10% updates (``+U``) and 2% deletes (``-D``) of ids inserted in any earlier batch,
shuffled within each batch. Each measurement runs in a fresh process that builds the
same stream, so peak memory (RSS above the process's state before writing) belongs
to that writer alone. Baselines in the same run: ``pyarrow.parquet`` writing the
same batches (row kind dropped) with the same codec, the append TaskWriter, and the
CDC writer of git revision ``REV`` (default: the commit before the key index, whose
writer kept a Python dict entry per live key), exported with ``git archive`` into a
temporary directory and run by this same script in a subprocess with that tree first on
``PYTHONPATH``; ``--baseline none`` skips it. ``--warm N`` runs each writer N times untimed
in its process before the timed run: the steady state of a Python worker Spark reuses,
without the first run's page faults and first calls. ``--writers delta`` runs the CDC writer
alone (100M keys: ``bench_delta.py 116000000 --writers delta --baseline none --rounds 1``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.catalogs import load_catalog
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("data", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("ts", pa.timestamp("us")),
    ]
)


def stream(rows: int, batch_rows: int, seed: int = 7) -> list[pa.Table]:
    """Change batches: row kind first, then the table columns."""
    rng = np.random.default_rng(seed)
    batches, next_id = [], 0
    for start in range(0, rows, batch_rows):
        n = min(batch_rows, rows - start)
        updates = int(n * 0.10) if next_id else 0
        deletes = int(n * 0.02) if next_id else 0
        inserts = n - updates - deletes
        changed = rng.integers(0, next_id or 1, updates + deletes)
        ids = np.concatenate([np.arange(next_id, next_id + inserts), changed])
        kinds = np.array(["+I"] * inserts + ["+U"] * updates + ["-D"] * deletes, dtype=object)
        next_id += inserts
        order = rng.permutation(n)
        ids, kinds = ids[order], kinds[order]
        batches.append(
            pa.table(
                {
                    "_row_kind": pa.array(kinds, pa.string()),
                    "id": pa.array(ids, pa.int64()),
                    "data": pa.array(np.char.add("row-", ids.astype(str)).astype(object)),
                    "value": pa.array(rng.random(n)),
                    "ts": pa.array(ids * 1_000_000 + 1_700_000_000_000_000, pa.timestamp("us")),
                }
            ).cast(pa.schema([pa.field("_row_kind", pa.string()), *SCHEMA]))
        )
    return batches


def _table(root: str, name: str) -> object:
    catalog = load_catalog("bench", type="hadoop", warehouse=os.path.join(root, "wh"))
    if not catalog.namespace_exists("db"):
        catalog.create_namespace("db")
    return catalog.create_table(f"db.{name}", schema=SCHEMA, identifier_fields=["id"])


def run_delta(batches: list[pa.Table], root: str, rows_per_task: int) -> str:
    table = _table(root, "delta")
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
    summary: dict[str, int] = {"data": 0, "eq": 0, "pos": 0}
    writer, written, task = factory.create(0, 0), 0, 0
    for batch in batches:
        writer.write(batch)
        written += batch.num_rows
        if written >= rows_per_task:
            _count(writer.complete(), summary)
            task, written = task + 1, 0
            writer = factory.create(0, task)
    _count(writer.complete(), summary)
    live = summary["data"] - summary["pos"]
    return (
        f"live keys {live:,}; data rows {summary['data']:,}, eq-delete rows {summary['eq']:,}, "
        f"pos deletes {summary['pos']:,}"
    )


def _count(result: object, summary: dict[str, int]) -> None:
    summary["data"] += sum(f.record_count for f in result.data_files)  # type: ignore[attr-defined]
    for f in result.delete_files:  # type: ignore[attr-defined]
        summary["eq" if f.equality_ids else "pos"] += f.record_count


def run_append(batches: list[pa.Table], root: str, _: int) -> str:
    writer = TaskWriterFactory.for_table(_table(root, "append")).create(0, 0)
    for batch in batches:
        writer.write(batch.drop_columns(["_row_kind"]))
    return f"{len(writer.complete().data_files)} files"


def run_parquet(batches: list[pa.Table], root: str, _: int) -> str:
    with pq.ParquetWriter(os.path.join(root, "plain.parquet"), SCHEMA, compression="zstd") as w:
        for batch in batches:
            w.write_table(batch.drop_columns(["_row_kind"]))
    return "1 file"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _measure(args: tuple[str, int, int, int, int]) -> tuple[float, int, str]:
    """One writer's time on the stream, after ``warm`` untimed runs in the same process."""
    name, rows, batch_rows, rows_per_task, warm = args
    run: Callable[[list[pa.Table], str, int], str] = globals()[name]
    batches = stream(rows, batch_rows)
    before = _rss_bytes()
    for _ in range(warm):
        with tempfile.TemporaryDirectory() as root:
            run(batches, root, rows_per_task)
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        note = run(batches, root, rows_per_task)
        elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    return elapsed, peak, note


BASELINE = "bf56fbc~1"
"""The commit before the key index: the CDC writer with a Python dict per live key."""


def run_baseline(rev: str, args: tuple[str, int, int, int, int]) -> tuple[float, int, str]:
    """``_measure(args)`` with the stream_sink of git revision ``rev``, in a subprocess."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", rev, "stream_sink"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": tree}
        out = subprocess.run(
            [sys.executable, __file__, "--measure", *map(str, args)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    elapsed, peak, note, origin = json.loads(out.splitlines()[-1])
    if not origin.startswith(tree):
        raise SystemExit(f"the baseline ran {origin}, not the exported revision")
    return elapsed, peak, note


def _median(measured: list[tuple[float, int, str]]) -> tuple[float, int, str]:
    """The median time, the largest peak, the note."""
    times = sorted(m[0] for m in measured)
    return times[len(times) // 2], max(m[1] for m in measured), measured[0][2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rows", nargs="?", type=int, default=1_000_000)
    ap.add_argument("batch_rows", nargs="?", type=int, default=10_000)
    ap.add_argument("rows_per_task", nargs="?", type=int, default=0)
    ap.add_argument("--baseline", default=BASELINE, help="git revision, or 'none'")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians)")
    ap.add_argument(
        "--writers",
        default="parquet,append,delta",
        help="which of parquet, append, delta run (for 100M keys: delta alone)",
    )
    ap.add_argument(
        "--warm",
        type=int,
        default=0,
        help="untimed runs of each writer in its process first (a reused Python worker)",
    )
    ap.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:  # a subprocess measuring one writer: one JSON line on stdout
        import stream_sink

        name, *sizes = a.measure
        result = _measure((name, *(int(x) for x in sizes)))  # type: ignore[arg-type]
        print(json.dumps([*result, stream_sink.__file__]))
        return
    rows, batch_rows, rows_per_task = a.rows, a.batch_rows, a.rows_per_task or a.rows
    writers = [w for w in ("parquet", "append", "delta") if w in a.writers.split(",")]
    if not writers:
        raise SystemExit(f"--writers: expected parquet, append and/or delta, got {a.writers!r}")
    ctx = mp.get_context("spawn")
    print(
        f"{rows:,} rows in batches of {batch_rows:,}, {rows_per_task:,} rows per task, "
        f"{a.warm} untimed runs first; load {os.getloadavg()[0]:.1f}"
    )
    runs: dict[str, list[tuple[float, int, str]]] = {}
    args = (rows, batch_rows, rows_per_task, a.warm)
    for _ in range(a.rounds):  # interleaved: a change of load hits every writer alike
        with ctx.Pool(1, maxtasksperchild=1) as pool:
            for name in (f"run_{w}" for w in writers):
                runs.setdefault(name[4:], []).append(pool.apply(_measure, ((name, *args),)))
        if a.baseline != "none" and "delta" in writers:
            old = run_baseline(a.baseline, ("run_delta", *args))
            runs.setdefault(f"delta@{a.baseline}", []).append(old)
    results = {name: _median(measured) for name, measured in runs.items()}
    base = results["parquet"][0] if "parquet" in results else None
    for name, (elapsed, peak, note) in results.items():
        ratio = f"ratio {base / elapsed:4.2f}x of pyarrow.parquet  " if base else ""
        print(
            f"{name:>16}: {elapsed:6.2f} s  {rows / elapsed:>10,.0f} rows/s  "
            f"{ratio}peak +{peak / 2**20:6.0f} MiB  ({note})"
        )
    if a.baseline != "none" and "delta" in results:
        before = results[f"delta@{a.baseline}"][0]
        print(f"CDC writer rows/s: {before / results['delta'][0]:.2f}x of {a.baseline}'s")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
