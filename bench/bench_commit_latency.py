"""Commit latency per micro-batch over a long stream, with in-sink expiry: does it grow?

The driver's side of an append stream, as ``IcebergSink`` runs it, without Spark: every
micro-batch writes a real data file (``--rows`` rows) with the sink's task writer into
the table's storage, then ``CommitDriver.record`` takes it through the
``FilesCommitter`` (RocksDB state with synced writes, a checkpoint per batch) into one
table commit carrying the sink's watermark; after each commit the in-sink maintenance
(``SinkMaintenance``, in its background thread, as the sink runs it: compaction,
snapshot expiry keeping the last ``--retain`` snapshots older than ``--max-age-ms``,
old metadata file removal, every 10 commits) is offered the table. The table is
created as the sink creates tables (old metadata files deleted after commit).

One catalog per child process (its own peak memory):

- ``hadoop``: Hadoop catalog on the local disk;
- ``sql``: SQL catalog on PostgreSQL (``--postgres-url``, else
  ``STREAM_SINK_TEST_POSTGRES_URL``, else a throwaway server from ``.ci/postgres.sh``),
  warehouse in a bucket of SeaweedFS's S3 (``weed mini`` on loopback);
- ``rest``: SeaweedFS's own Iceberg REST catalog (a table bucket on the same server);
  the maintenance lock's location is the one the sink records by itself, beside its
  checkpoints (its table bucket takes no lock file);
- ``iceberg-rest``: Apache Iceberg's own REST catalog server (``RESTCatalogServer``, the
  tests' reference server, ``tests/iceberg_rest_server.py``: jars resolved by Maven, a
  JDBC catalog on SQLite, tables on the local disk).

    python bench/bench_commit_latency.py [--commits 2000]
        [--catalogs hadoop,sql,rest,iceberg-rest]

Prints, per catalog, the median time of ``record`` (process + checkpoint + table
commit: what a micro-batch waits for), its CPU time on the calling thread (which moves
less with the machine's load: wall time is mostly fsync and network waits) and the
table commit alone, over the first and the last 100 commits, with their ratios (goal:
last / first <= 1.3), what the table and the
state hold at the end (snapshots, manifests, metadata JSON bytes, state keys), the
child's peak RSS and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.commit.driver import CommitDriver
from stream_sink.exceptions import CatalogError
from stream_sink.maintenance import MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.lease_lock import sink_lock_location
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.catalog.metadata_files import STREAMING_METADATA_PROPERTIES
from stream_sink.table.manifest import snapshot_manifests
from stream_sink.table.table import Table
from stream_sink.write.writer_factory import TaskWriterFactory

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64())])
WINDOW = 100
GOAL = 1.3
CATALOGS = ("hadoop", "sql", "rest", "iceberg-rest")


def batch(b: int, rows: int) -> pa.Table:
    ids = pa.array(range(b * rows, (b + 1) * rows), pa.int64())
    return pa.table({"id": ids, "v": pa.array([b] * rows, pa.int64())})


def stream(table: Table, scratch: Path, args: argparse.Namespace) -> dict[str, object]:
    """Run ``args.commits`` micro-batches into ``table``; the timings and end state."""
    checkpoints = str(scratch / "checkpoints")
    committer = FilesCommitter(
        IcebergTarget(table),
        StateDirectory(str(scratch / "state" / "t"), kind="rocksdb"),
        CheckpointStorage(checkpoints, "t"),
        job_id="bench",
        operator_id="t",
    )
    options = MaintenanceOptions(
        commit_count=10, max_snapshot_age_ms=args.max_age_ms, retain_last=args.retain
    )
    maintenance = SinkMaintenance(
        lambda: table.catalog.load_table(table.identifier),
        options,
        "sink:t",
        lock_location=sink_lock_location(checkpoints, "t"),  # as IcebergSink passes it
    )
    maintenance.protect(committer.uncommitted_paths)
    driver = CommitDriver(after_checkpoint=lambda _: maintenance.after_commit(table.metadata))
    driver.open("t", committer, None)
    record_ms, record_cpu_ms, commit_ms = [], [], []
    try:
        for b in range(args.commits):
            writer = TaskWriterFactory.for_table(table).create(0, b)
            writer.write(batch(b, args.rows))
            result = writer.complete()
            started, cpu = time.perf_counter(), time.thread_time()
            driver.record(b, {"t": result})
            record_ms.append((time.perf_counter() - started) * 1000)
            record_cpu_ms.append((time.thread_time() - cpu) * 1000)
            commit_ms.append(committer.metrics.snapshot().last_commit_duration_ms or 0.0)
        maintenance.wait()
        state_keys = sum(1 for _ in committer.state.scan())
    finally:
        driver.close()
    table.refresh()
    meta = table.metadata
    head = table.current_snapshot()
    m = maintenance.metrics
    return {
        "record_ms": record_ms,
        "record_cpu_ms": record_cpu_ms,
        "commit_ms": commit_ms,
        "snapshots": len(meta.snapshots),
        "manifests": len(snapshot_manifests(table.io, head)) if head else 0,
        "metadata_json": len(meta.to_json()),
        "metadata_log": len(meta.metadata_log),
        "state_keys": state_keys,
        "maintenance": f"{m.runs} runs, {m.failures} failed",
    }


@contextmanager
def postgres(url: str | None) -> Iterator[str]:
    """``url``, or a throwaway server from ``.ci/postgres.sh`` for this run."""
    if url:
        yield url
        return
    where = tempfile.mkdtemp(prefix="bench-pg-")
    script = str(ROOT / ".ci" / "postgres.sh")
    try:
        yield subprocess.run(
            [script, where], check=True, capture_output=True, text=True
        ).stdout.strip()
    finally:
        subprocess.run([script, "stop", where], check=False, capture_output=True)
        shutil.rmtree(where, ignore_errors=True)


def rest_catalog(props: dict[str, str]) -> Catalog:
    """The REST catalog with namespace ``bench`` (a just-started server may refuse its
    first requests)."""
    for attempt in range(20):
        try:
            catalog = load_catalog("bench", type="rest", **props)
            catalog.create_namespace("bench")
            return catalog
        except CatalogError:
            if attempt == 19:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def start_seaweed(scratch: Path) -> Any:
    """``weed mini`` on loopback; started again (up to 3 times) when it exits at start
    (a port taken between picking it and binding it), with its log's tail shown."""
    from seaweed_server import SeaweedServer

    for attempt in range(3):
        where = scratch / f"weed{attempt}"
        try:
            return SeaweedServer.start(where, buckets=("lake",), table_buckets=("warehouse",))
        except RuntimeError:
            log = where / "weed.log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            print(f"weed mini failed to start (attempt {attempt + 1}):\n{tail}", file=sys.stderr)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def start_iceberg_rest(scratch: Path) -> Any:
    """Apache Iceberg's REST catalog server on loopback, its jars resolved by Maven into
    the tests' cache (``~/.cache/stream-sink``) on first use."""
    from iceberg_rest_server import IcebergRestServer, resolve_jars

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stream-sink"
    return IcebergRestServer.start(scratch / "iceberg-rest", resolve_jars(cache))


def open_table(kind: str, scratch: Path, args: argparse.Namespace) -> Iterator[Table]:
    """A fresh table in catalog ``kind``, with whatever server it needs for the run."""
    properties = dict(STREAMING_METADATA_PROPERTIES)
    if kind == "hadoop":
        catalog = load_catalog("bench", type="hadoop", warehouse=str(scratch / "warehouse"))
        catalog.create_namespace("bench")
        yield catalog.create_table("bench.t", SCHEMA, properties=properties)
        return
    if kind == "iceberg-rest":
        reference = start_iceberg_rest(scratch)
        try:
            catalog = rest_catalog({"uri": reference.uri})
            yield catalog.create_table("bench.t", SCHEMA, properties=properties)
        finally:
            reference.stop()
        return
    server = start_seaweed(scratch)
    try:
        if kind == "rest":
            catalog = rest_catalog(server.rest_props("warehouse"))
            yield catalog.create_table("bench.t", SCHEMA, properties=properties)
            return
        with postgres(args.postgres_url) as url:
            catalog = load_catalog(
                f"bench{uuid.uuid4().hex[:6]}",
                type="sql",
                uri=url,
                warehouse="s3://lake/warehouse",
                **server.s3_props,
            )
            catalog.create_namespace("bench")
            yield catalog.create_table("bench.t", SCHEMA, properties=properties)
    finally:
        server.stop()


def run_one(kind: str, args: argparse.Namespace) -> None:
    """Child process: one catalog's stream; prints one JSON line."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scratch = Path(tempfile.mkdtemp(prefix=f"bench-latency-{kind}-"))
    try:
        tables = open_table(kind, scratch, args)
        table = next(tables)
        try:
            out = stream(table, scratch, args)
        finally:
            tables.close()
        out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(out), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def growth(values: list[float], window: int) -> tuple[float, float, float]:
    first, last = statistics.median(values[:window]), statistics.median(values[-window:])
    return first, last, last / first


def report(kind: str, out: dict[str, Any], window: int, load: tuple[float, ...]) -> None:
    record = growth(out["record_ms"], window)
    cpu = growth(out["record_cpu_ms"], window)
    commit = growth(out["commit_ms"], window)
    after = os.getloadavg()
    print(
        f"{kind:12s} record: first {window} {record[0]:7.1f} ms  last {window} {record[1]:7.1f} ms"
        f"  x{record[2]:.2f} ({'ok' if record[2] <= GOAL else f'above the {GOAL} goal'})\n"
        f"{'':12s} record's CPU (this thread): {cpu[0]:7.1f} ms -> {cpu[1]:7.1f} ms"
        f"  x{cpu[2]:.2f}\n"
        f"{'':12s} table commit alone: {commit[0]:7.1f} ms -> {commit[1]:7.1f} ms"
        f"  x{commit[2]:.2f}\n"
        f"{'':12s} at the end: {out['snapshots']} snapshots, {out['manifests']} manifests, "
        f"metadata JSON {out['metadata_json']} B ({out['metadata_log']} log entries), "
        f"{out['state_keys']} state keys; maintenance {out['maintenance']}\n"
        f"{'':12s} peak RSS {out['peak_mib']:.0f} MiB; load {load[0]:.1f} before, "
        f"{after[0]:.1f} after (1-min averages)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--catalogs", default=",".join(CATALOGS))
    parser.add_argument("--rows", type=int, default=100, help="rows per micro-batch")
    parser.add_argument("--retain", type=int, default=20, help="snapshots expiry keeps")
    parser.add_argument("--max-age-ms", type=int, default=1000, help="expire older than this")
    parser.add_argument("--postgres-url", default=os.environ.get("STREAM_SINK_TEST_POSTGRES_URL"))
    parser.add_argument("--one", choices=CATALOGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one, args)
        return
    window = min(WINDOW, args.commits // 2)
    print(
        f"{args.commits} micro-batches of {args.rows} rows per catalog; in-sink maintenance "
        f"every 10 commits, expiry keeping {args.retain} snapshots (older than "
        f"{args.max_age_ms} ms); median of the first and the last {window}"
    )
    medians: dict[str, float] = {}
    for kind in args.catalogs.split(","):
        load = os.getloadavg()
        child = [sys.executable, __file__, "--one", kind, *sys.argv[1:]]
        done = subprocess.run(child, capture_output=True, text=True)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"{kind:12s} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
            continue
        out = json.loads(lines[-1])
        report(kind, out, window, load)
        medians[kind] = statistics.median(out["commit_ms"])
    for rest in ("rest", "iceberg-rest"):
        if "sql" in medians and rest in medians:
            print(
                f"table commit, median of all: {rest} {medians[rest]:.1f} ms / sql "
                f"{medians['sql']:.1f} ms = x{medians[rest] / medians['sql']:.2f}"
            )


if __name__ == "__main__":
    main()
