"""Driver-side overhead of the FilesCommitter per checkpoint, and its growth over time.

One checkpoint = process(batch) + snapshot_state + complete_checkpoint + notify (one batch
per checkpoint, append shape), RocksDB state with synced writes, Hadoop-catalog table on
the local disk. Data files are described, not written: the committer never opens them.

    python bench/bench_committer.py [--checkpoints 1000] [--samples 40]

Prints the median per-checkpoint wall and CPU time for 1, 10 and 100 data files per batch
(ratio against 1 file, measured in the same run), the one-file figure against the goal
(driver overhead per micro-batch <= 25 ms, durability unchanged: every state write is
synced), then the growth over ``--checkpoints``
checkpoints: median of the last 50 divided by the median of the first 50 (goal <= 1.5).
Wall time is mostly fsync waits and moves with the machine's I/O load; CPU time shows
algorithmic growth on a busy machine.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import statistics
import struct
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])


def fake_result(table: Table, files: int, batch_id: int) -> WriteResult:
    """``files`` data files with realistic metrics (never read by the committer)."""
    out = []
    for i in range(files):
        lo, hi = batch_id * 1_000_000 + i * 1000, batch_id * 1_000_000 + i * 1000 + 999
        out.append(
            DataFile(
                content=DataFileContent.DATA,
                file_path=f"{table.data_location}/{uuid.uuid4()}-{i:05d}.parquet",
                file_format=FileFormat.PARQUET,
                spec_id=0,
                partition=(),
                record_count=1000,
                file_size_in_bytes=64_000,
                column_sizes={1: 8000, 2: 56000},
                value_counts={1: 1000, 2: 1000},
                null_value_counts={1: 0, 2: 0},
                lower_bounds={1: struct.pack("<q", lo), 2: b"a"},
                upper_bounds={1: struct.pack("<q", hi), 2: b"z"},
                split_offsets=(4,),
            )
        )
    return WriteResult(tuple(out))


PHASES = ("process+snapshot", "complete", "notify", "table commit")
GOAL_MS = 25.0


@dataclass(frozen=True)
class Sample:
    """Seconds for one checkpoint: total (wall, CPU) and per phase (wall, CPU); the
    table commit inside notify is wall time only (from the committer's metrics)."""

    wall: float
    cpu: float
    phases: tuple[tuple[float, float], ...]


class Sink:
    def __init__(self, root: Path) -> None:
        catalog = load_catalog("bench", type="hadoop", warehouse=str(root / "warehouse"))
        catalog.create_namespace("db")
        self.table = catalog.create_table("db.t", schema=SCHEMA)
        self.committer = FilesCommitter(
            IcebergTarget(self.table),
            StateDirectory(str(root / "state" / "t"), kind="rocksdb"),
            CheckpointStorage(str(root / "checkpoints"), "t"),
            job_id="bench",
            operator_id="t",
        )
        self.committer.restore()
        self.batch = 0

    def checkpoint(self, files: int) -> Sample:
        """One batch through the whole protocol."""
        result = fake_result(self.table, files, self.batch)
        c, b = self.committer, self.batch
        marks = [(time.perf_counter(), time.process_time())]
        c.process(b, result)
        c.snapshot_state(b)
        marks.append((time.perf_counter(), time.process_time()))
        c.complete_checkpoint(b)
        marks.append((time.perf_counter(), time.process_time()))
        c.notify_checkpoint_complete(b)
        marks.append((time.perf_counter(), time.process_time()))
        self.batch += 1
        phases = [(z[0] - a[0], z[1] - a[1]) for a, z in itertools.pairwise(marks)]
        commit_ms = c.metrics.snapshot().last_commit_duration_ms or 0.0
        phases.append((commit_ms / 1000, float("nan")))
        total = marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1]
        return Sample(total[0], total[1], tuple(phases))

    def close(self) -> None:
        self.committer.close()


Timings = list[Sample]


def in_scratch(fn: Callable[[Path], Timings]) -> Timings:
    root = Path(tempfile.mkdtemp(prefix="bench-committer-"))
    try:
        return fn(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def per_size(files: int, samples: int) -> Timings:
    def run(root: Path) -> Timings:
        sink = Sink(root)
        try:
            for _ in range(3):  # warm up
                sink.checkpoint(files)
            return [sink.checkpoint(files) for _ in range(samples)]
        finally:
            sink.close()

    return in_scratch(run)


def growth(checkpoints: int) -> Timings:
    def run(root: Path) -> Timings:
        sink = Sink(root)
        try:
            return [sink.checkpoint(1) for _ in range(checkpoints)]
        finally:
            sink.close()

    return in_scratch(run)


def median_ms(values: Timings, which: int, phase: int | None = None) -> float:
    if phase is None:
        return statistics.median(v.wall if which == 0 else v.cpu for v in values) * 1000
    return statistics.median(v.phases[phase][which] for v in values) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoints", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args()

    print("per-checkpoint driver overhead (process + snapshot_state + complete + notify)")
    print(f"{'files/batch':>12} {'wall ms':>8} {'p90 ms':>8} {'cpu ms':>8} {'wall vs 1':>10}")
    baseline = None
    for files in (1, 10, 100):
        times = per_size(files, args.samples)
        wall, cpu = median_ms(times, 0), median_ms(times, 1)
        p90 = statistics.quantiles([t.wall for t in times], n=10)[-1] * 1000
        baseline = baseline or wall
        print(f"{files:>12} {wall:>8.1f} {p90:>8.1f} {cpu:>8.1f} {wall / baseline:>9.2f}x")
    assert baseline is not None
    verdict = "ok" if baseline <= GOAL_MS else "above the goal"
    print(
        f"driver overhead per micro-batch with one data file: {baseline:.1f} ms median wall"
        f" (goal <= {GOAL_MS:.0f} ms): {verdict}"
    )

    n = args.checkpoints
    times = growth(n)
    w = min(50, n // 2)
    first, last = times[:w], times[-w:]
    print(f"\ngrowth over {n} checkpoints (1 file/batch): median of the last {w} / first {w}")
    head = f"{'wall first':>10} {'last':>7} {'ratio':>6}  {'cpu first':>9} {'last':>7} {'ratio':>6}"
    print(f"{'':>17} {head}")
    rows: list[tuple[str, int | None]] = [("total", None)]
    rows += [(name, i) for i, name in enumerate(PHASES)]
    for label, phase in rows:
        cells = []
        for which in (0, 1):
            a, z = median_ms(first, which, phase), median_ms(last, which, phase)
            cells.append(f"{a:>9.1f} {z:>7.1f} {z / a if a else float('nan'):>5.2f}x")
        print(f"{label:>17} {cells[0]}  {cells[1]}")
    ratio = median_ms(last, 0) / median_ms(first, 0)
    print(f"total wall growth {ratio:.2f}x: " + ("ok" if ratio <= 1.5 else "above the 1.5x goal"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MiB")
    print(f"load average while measuring: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
