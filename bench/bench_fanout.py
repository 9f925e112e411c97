"""Fanout writer over 100 partitions against raw Parquet writing of the same rows.

Run: ``python bench/bench_fanout.py [rows] [batch_rows] [runs]`` (defaults 2,000,000,
100,000 and 3).

The rows are bench_append's (int64 id, timestamp, 8-value string, double, 40-byte
payload); the table is partitioned by ``bucket[100](id)``, so every batch touches all
100 partitions. Measured: the PartitionedFanoutWriter (one task, batches of
``batch_rows``) against ``pyarrow.parquet.ParquetWriter`` writing the same batches to
one file with the same codec. Each measurement runs in a fresh process so its peak
memory (RSS above the process's state before writing) is its own. Best of ``runs``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from bench_append import CODEC, make_rows

from stream_sink.catalogs import load_catalog
from stream_sink.write.writer_factory import TaskWriterFactory

PARTITIONS = 100


def batches(rows: int, batch_rows: int) -> list[pa.Table]:
    data = make_rows(rows)
    return [data.slice(i, batch_rows) for i in range(0, rows, batch_rows)]


class PeakRss:
    """Peak resident memory while the block runs, above the RSS when it started.

    Sampled every 5 ms from /proc/self/statm (ru_maxrss cannot be reset, and the data
    generation before the block peaks higher than the writers)."""

    def __enter__(self) -> PeakRss:
        self.base = self.peak = _rss_mib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_mib())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mib())

    @property
    def above_base(self) -> float:
        return self.peak - self.base


def _rss_mib() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:  # not Linux: the lifetime peak is the best there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_raw(parts: list[pa.Table], root: Path) -> None:
    writer = pq.ParquetWriter(root / "raw.parquet", parts[0].schema, compression=CODEC)
    for part in parts:
        writer.write_table(part)
    writer.close()


def run_fanout(parts: list[pa.Table], root: Path) -> int:
    catalog = load_catalog("bench", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", parts[0].schema, partition_spec=[("bucket", "id", PARTITIONS)]
    )
    writer = TaskWriterFactory.for_table(table).create(0, 0)
    for part in parts:
        writer.write(part)
    return len(writer.complete().data_files)


def measure(kind: str, rows: int, batch_rows: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    parts = batches(rows, batch_rows)
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp, PeakRss() as memory:
        t0, c0 = time.perf_counter(), time.process_time()
        files = run_raw(parts, Path(tmp)) if kind == "raw" else run_fanout(parts, Path(tmp))
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    out.put((elapsed, cpu, memory.above_base, files))


Measurement = tuple[float, float, float, int | None]  # wall s, CPU s, peak MiB, files


def in_fresh_process(kind: str, rows: int, batch_rows: int) -> Measurement:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=measure, args=(kind, rows, batch_rows, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result  # type: ignore[no-any-return]


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    batch_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    results: dict[str, list[Measurement]] = {"raw": [], "fanout": []}
    for _ in range(runs):
        for kind in results:
            results[kind].append(in_fresh_process(kind, rows, batch_rows))
    raw, fan = results["raw"], results["fanout"]
    print(
        f"rows: {rows:,} in batches of {batch_rows:,}, bucket[{PARTITIONS}](id), codec {CODEC},"
        f" best of {runs} (wall and CPU seconds; CPU is the fair figure on a busy machine)"
    )
    for label, ms in (("pyarrow ParquetWriter, one file", raw), ("PartitionedFanoutWriter", fan)):
        wall, cpu = min(m[0] for m in ms), min(m[1] for m in ms)
        files = f", {ms[0][3]} files" if ms[0][3] is not None else ""
        print(
            f"  {label + files:38s} wall {wall:6.2f} s  cpu {cpu:6.2f} s"
            f"  {rows / wall:12,.0f} rows/s  peak RSS +{max(m[2] for m in ms):.0f} MiB"
        )
    wall_ratio = min(m[0] for m in raw) / min(m[0] for m in fan)
    cpu_ratio = min(m[1] for m in raw) / min(m[1] for m in fan)
    print(f"  ratio fanout/raw: wall {wall_ratio:.2f}x  cpu {cpu_ratio:.2f}x  (goal >= 0.60x)")


if __name__ == "__main__":
    main()
