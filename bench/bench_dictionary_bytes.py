"""Bytes of Iceberg data files: dictionary only where it pays vs Arrow's default.

Run: ``.venv/bin/python bench/bench_dictionary_bytes.py [files] [rows_per_file]``
(defaults 8 x 250,000: the rows of ``bench_vs_iceberg_spark.py``).

The same rows are appended two files at a time (as that benchmark's
``maxFilesPerTrigger=2``) into (a) a table through ``IcebergTable.append``, the
writer of the ``arrow`` route, which keeps a column's dictionary only where it pays
(``stream_sink/parquet/dictionary.py``), and (b) the baseline: the same batches written
with the same writer options (zstd, page sizes) and Arrow's default of a dictionary on
every column. Prints each column's bytes (footer column chunk sizes) and the totals, the
ratio ours / baseline, the time of each side, peak memory and the load average.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spark_sink import SCHEMA, make_input

import stream_sink as ss
from stream_sink.write.config import ParquetOptions


def column_bytes(paths: list[Path]) -> Counter[str]:
    sizes: Counter[str] = Counter()
    for p in paths:
        md = pq.ParquetFile(p).metadata
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            for c in range(rg.num_columns):
                col = rg.column(c)
                sizes[col.path_in_schema] += col.total_compressed_size
    return sizes


def main() -> None:
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 250_000
    print(f"load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        make_input(work / "in", files, rows)
        inputs = sorted((work / "in").glob("*.parquet"))
        batches = [
            pa.concat_tables([pq.read_table(p) for p in inputs[i : i + 2]])
            for i in range(0, len(inputs), 2)
        ]
        catalog = ss.load_catalog("hadoop", warehouse=str(work / "wh"))
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", SCHEMA)
        started = time.perf_counter()
        for batch in batches:
            table.append(batch)  # type: ignore[attr-defined]
        ours_s = time.perf_counter() - started
        ours_paths = sorted((work / "wh").rglob("data/*.parquet"))

        base_dir = work / "baseline"
        base_dir.mkdir()
        started = time.perf_counter()
        for i, batch in enumerate(batches):
            pq.write_table(batch, base_dir / f"{i}.parquet", **ParquetOptions().writer_kwargs())
        base_s = time.perf_counter() - started
        base_paths = sorted(base_dir.glob("*.parquet"))

        ours, base = column_bytes(ours_paths), column_bytes(base_paths)
        print(f"{'column':<10} {'arrow default':>14} {'ours':>14}")
        for name in base:
            print(f"{name:<10} {base[name]:>14,} {ours[name]:>14,}")
        ours_total = sum(p.stat().st_size for p in ours_paths)
        base_total = sum(p.stat().st_size for p in base_paths)
        print(f"{'files':<10} {base_total:>14,} {ours_total:>14,}")
        print(f"ratio ours / arrow default: {ours_total / base_total:.3f}")
        print(f"seconds: arrow default {base_s:.2f}, ours {ours_s:.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak:.0f} MiB; load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
