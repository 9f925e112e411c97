"""Fanout writer over 100 partitions against raw Parquet writing of the same rows.

Run: ``python bench/bench_fanout.py [rows] [batch_rows] [runs]`` (defaults 2,000,000,
100,000 and 5).

The rows are bench_append's (int64 id, timestamp, 8-value string, double, 40-byte
payload); the table is partitioned by ``bucket[100](id)``, so every batch touches all
100 partitions. Measured, each in a fresh process so its peak memory (RSS above the
process's state before writing) is its own, taking turns, medians of ``runs``:

- the PartitionedFanoutWriter (one task, batches of ``batch_rows``): the goal's side;
- ``pyarrow.parquet.ParquetWriter`` writing the same batches to one file: the goal's
  baseline ("a raw pyarrow write of the same rows");
- the same writer writing the rows already grouped into their 100 partition files
  (grouped before the clock starts): what 100 files cost by themselves;
- pyarrow's own partitioned writer, ``pyarrow.dataset.write_dataset`` partitioned by
  the bucket (its values computed before the clock starts, pyarrow's thread pools cut
  to one thread, every file written as one row group like the sink's): what a pyarrow
  user writes 100 partitions with.

All pyarrow writers use the table's own Parquet settings (``ParquetOptions.writer_kwargs``,
the call the sink's writer makes): same codec, level, page and dictionary sizes.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from bench_append import CODEC, make_rows

from stream_sink.catalogs import load_catalog
from stream_sink.write.config import WriteConfig
from stream_sink.write.grouping import group_by_partition
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


def table_properties() -> dict[str, str]:
    """The table's properties: only the codec is set (bench_append's, zstd, Iceberg's
    default); everything else is the default both sides share."""
    return {"write.parquet.compression-codec": CODEC}


def parquet_kwargs() -> dict[str, object]:
    """The table's Parquet writer settings, exactly as the sink's writer passes them."""
    return WriteConfig.from_properties(table_properties()).parquet.writer_kwargs()


def new_table(root: Path, schema: pa.Schema) -> object:
    catalog = load_catalog("bench", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    return catalog.create_table(
        "db.t",
        schema,
        partition_spec=[("bucket", "id", PARTITIONS)],
        properties=table_properties(),
    )


def run_raw(parts: list[pa.Table], root: Path) -> int:
    writer = pq.ParquetWriter(root / "raw.parquet", parts[0].schema, **parquet_kwargs())  # type: ignore[arg-type]
    for part in parts:
        writer.write_table(part)
    writer.close()
    return 1


def grouped(parts: list[pa.Table], root: Path) -> list[pa.Table]:
    """The rows as one contiguous table per partition (done before the clock starts)."""
    factory = TaskWriterFactory.for_table(new_table(root / "grouping", parts[0].schema))  # type: ignore[arg-type]
    data = pa.concat_tables(parts)
    groups = group_by_partition(data, factory.spec, factory.schema)
    return [g.rows.combine_chunks() for g in groups]


def run_raw_files(groups: list[pa.Table], root: Path) -> int:
    kwargs = parquet_kwargs()
    for i, rows in enumerate(groups):
        writer = pq.ParquetWriter(root / f"part-{i:03d}.parquet", rows.schema, **kwargs)  # type: ignore[arg-type]
        writer.write_table(rows)
        writer.close()
    return len(groups)


def with_buckets(parts: list[pa.Table], root: Path) -> list[pa.Table]:
    """The batches with the partition value as a column (before the clock starts)."""
    factory = TaskWriterFactory.for_table(new_table(root / "buckets", parts[0].schema))  # type: ignore[arg-type]
    return [p.append_column("bucket", factory.spec.compute(p, factory.schema)[0]) for p in parts]


def run_dataset(parts: list[pa.Table], root: Path) -> int:
    """One core, as a Spark task has: pyarrow's CPU and I/O pools cut to one thread
    (``use_threads=False`` alone still encodes files on the I/O pool)."""
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    rows = sum(p.num_rows for p in parts)
    options = ds.ParquetFileFormat().make_write_options(**parquet_kwargs())
    ds.write_dataset(
        parts,
        root / "dataset",
        format="parquet",
        file_options=options,
        partitioning=ds.partitioning(pa.schema([("bucket", pa.int32())]), flavor="hive"),
        min_rows_per_group=rows,
        max_rows_per_group=rows,
        use_threads=False,
        existing_data_behavior="overwrite_or_ignore",
    )
    return sum(1 for _ in (root / "dataset").rglob("*.parquet"))


def run_fanout(parts: list[pa.Table], root: Path) -> int:
    table = new_table(root, parts[0].schema)
    writer = TaskWriterFactory.for_table(table).create(0, 0)  # type: ignore[arg-type]
    for part in parts:
        writer.write(part)
    return len(writer.complete().data_files)


def measure(kind: str, rows: int, batch_rows: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    parts = batches(rows, batch_rows)
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        groups = grouped(parts, Path(tmp)) if kind == "raw100" else []
        bucketed = with_buckets(parts, Path(tmp)) if kind == "dataset" else []
        with PeakRss() as memory:
            t0, c0 = time.perf_counter(), time.process_time()
            if kind == "raw":
                files = run_raw(parts, Path(tmp))
            elif kind == "raw100":
                files = run_raw_files(groups, Path(tmp))
            elif kind == "dataset":
                files = run_dataset(bucketed, Path(tmp))
            else:
                files = run_fanout(parts, Path(tmp))
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    out.put((elapsed, cpu, memory.above_base, files))


Measurement = tuple[float, float, float, int]  # wall s, CPU s, peak MiB, files


def in_fresh_process(kind: str, rows: int, batch_rows: int) -> Measurement:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=measure, args=(kind, rows, batch_rows, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result  # type: ignore[no-any-return]


LABELS = {
    "raw": "pyarrow ParquetWriter, one file",
    "raw100": "pyarrow, rows pre-grouped into 100 files",
    "dataset": "pyarrow.dataset.write_dataset, 100 partitions",
    "fanout": "PartitionedFanoutWriter",
}


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    batch_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    results: dict[str, list[Measurement]] = {kind: [] for kind in LABELS}
    for _ in range(runs):
        for kind in results:
            results[kind].append(in_fresh_process(kind, rows, batch_rows))
    print(
        f"rows: {rows:,} in batches of {batch_rows:,}, bucket[{PARTITIONS}](id), codec {CODEC},"
        f" medians of {runs} interleaved runs (wall and CPU seconds of the writing process)"
    )
    wall = {k: statistics.median(m[0] for m in ms) for k, ms in results.items()}
    cpu = {k: statistics.median(m[1] for m in ms) for k, ms in results.items()}
    for kind, ms in results.items():
        label = f"{LABELS[kind]}, {ms[0][3]} file{'s' if ms[0][3] != 1 else ''}"
        print(
            f"  {label:58s} wall {wall[kind]:6.2f} s  cpu {cpu[kind]:6.2f} s"
            f"  {rows / wall[kind]:12,.0f} rows/s  peak RSS +{max(m[2] for m in ms):.0f} MiB"
        )
    for base, goal in (("raw", " (goal >= 0.80x)"), ("raw100", ""), ("dataset", "")):
        print(
            f"  ratio fanout / {LABELS[base]}: wall {wall[base] / wall['fanout']:.2f}x"
            f"  cpu {cpu[base] / cpu['fanout']:.2f}x{goal}"
        )
    print(f"  load average while measuring: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
