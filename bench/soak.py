"""A long-running CDC stream with in-sink maintenance: does everything stay flat?

Run: ``python bench/soak.py --minutes 60`` (see ``--help``). Spark's ``rate`` source
makes ``--rate`` rows a second (``value`` 0, 1, 2, ...); each row upserts key
``id = value % --keys`` with ``order_by="value"`` and a payload, through ``IcebergSink``
(a ``bucket(4, id)`` table, in-sink maintenance with ``commit_count=10``,
``max_snapshot_age_ms=60_000``, ``retain_last=5``) or ``DeltaSink`` (``--format
delta``: a ``part = id % 4`` partitioned table), triggered every ``--trigger-ms``.

Every ``--sample-s`` a sampler reads: the micro-batch times Spark reports
(``triggerExecution``), data and delete files on disk, the table's live data and delete
files and snapshots (Iceberg) or log files (Delta), the sizes of the metadata folder
(``metadata/`` or ``_delta_log/``), the sink's state and checkpoint folders, the
driver's and the JVM's resident memory, ``/proc/loadavg`` and the in-sink
maintenance's counters. Every ``--interval-s`` it prints one line; at the end the growth
of each against minute 2-5 (batch time) or minute 5 (the rest), the criteria of a flat
run, and whether the final table is exact: one row per key, whose values are exactly
the last ``--keys`` values committed (the rate source's values are contiguous).

``--catalog sql --postgres-url URL`` uses the SQL catalog on PostgreSQL; ``--json FILE``
writes every sample. The run's folders are under ``--dir`` (a temporary folder by
default, removed at the end unless ``--keep``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import stream_sink as ss
from stream_sink.maintenance import MaintenanceOptions

KEYS_COLUMN = "id"


@dataclass
class Sample:
    t_s: float
    batches: int
    batch_ms: list[float]
    batch_rows: list[int]
    data_files_on_disk: int
    delete_files_on_disk: int
    live_data_files: int
    live_delete_files: int
    live_deletes: int
    snapshots: int
    metadata_files: int
    metadata_bytes: int
    state_bytes: int
    state_files: int
    checkpoint_bytes: int
    driver_rss_mb: float
    jvm_rss_mb: float
    load1: float
    maintenance: dict[str, Any] = field(default_factory=dict)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--rate", type=int, default=2000, help="rows a second")
    p.add_argument("--keys", type=int, default=20_000)
    p.add_argument("--trigger-ms", type=int, default=1000)
    p.add_argument("--sample-s", type=float, default=10.0)
    p.add_argument("--interval-s", type=float, default=60.0)
    p.add_argument("--format", choices=("iceberg", "delta"), default="iceberg")
    p.add_argument("--catalog", choices=("hadoop", "sql"), default="hadoop")
    p.add_argument("--postgres-url", default=os.environ.get("STREAM_SINK_TEST_POSTGRES_URL"))
    p.add_argument("--no-maintenance", action="store_true")
    p.add_argument(
        "--delta-log-retention",
        default="interval 2 minutes",
        help="delta.logRetentionDuration of the Delta table (checkpoints every 10 commits)",
    )
    p.add_argument(
        "--delta-file-retention",
        default="interval 1 minute",
        help="delta.deletedFileRetentionDuration of the Delta table (what its vacuum keeps)",
    )
    p.add_argument("--dir", default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


# --- measuring ---------------------------------------------------------------------------


def tree(path: Path, suffixes: tuple[str, ...] = ()) -> tuple[int, int]:
    """(files, bytes) under ``path`` (only names ending in ``suffixes`` when given)."""
    files = size = 0
    for root, _, names in os.walk(path):
        for n in names:
            if suffixes and not n.endswith(suffixes):
                continue
            try:
                size += os.stat(os.path.join(root, n)).st_size
                files += 1
            except OSError:
                pass
    return files, size


def rss_mb(pid: int | str = "self") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


class Sampler:
    """Collects a :class:`Sample` every ``sample_s`` on its own thread."""

    def __init__(self, run: Run, sample_s: float) -> None:
        self.run, self.sample_s = run, sample_s
        self.samples: list[Sample] = []
        self._seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.sample_s):
            try:
                self.samples.append(self.take())
            except Exception as e:  # a sample that fails is reported, the run goes on
                print(f"  sample failed: {type(e).__name__}: {e}", flush=True)

    def batch_times(self) -> list[tuple[float, int]]:
        """(triggerExecution ms, input rows) of the batches finished since the last call."""
        out = []
        for p in self.run.query.recentProgress:
            bid = int(p.batchId)
            if bid in self._seen or int(p.numInputRows) == 0:
                continue
            self._seen.add(bid)
            out.append((float(p.durationMs.get("triggerExecution", 0)), int(p.numInputRows)))
        return out

    def take(self) -> Sample:
        r = self.run
        times = self.batch_times()
        table = r.table_stats()
        meta_files, meta_bytes = tree(r.metadata_dir)
        state_files, state_bytes = tree(r.state_dir)
        _, ckpt_bytes = tree(r.checkpoint_dir)
        data_files = tree(r.data_dir, (".parquet",))[0]
        m = r.sink.maintenance_metrics if hasattr(r.sink, "maintenance_metrics") else None
        return Sample(
            t_s=time.monotonic() - r.started,
            batches=len(times),
            batch_ms=[t for t, _ in times],
            batch_rows=[n for _, n in times],
            data_files_on_disk=data_files - r.delete_files_on_disk(),
            delete_files_on_disk=r.delete_files_on_disk(),
            live_data_files=table["data_files"],
            live_delete_files=table["delete_files"],
            live_deletes=table["deletes"],
            snapshots=table["snapshots"],
            metadata_files=meta_files,
            metadata_bytes=meta_bytes,
            state_bytes=state_bytes,
            state_files=state_files,
            checkpoint_bytes=ckpt_bytes,
            driver_rss_mb=rss_mb(),
            jvm_rss_mb=rss_mb(r.jvm_pid),
            load1=load1(),
            maintenance=asdict(m) if m is not None else {},
        )


# --- the stream ----------------------------------------------------------------------------


class Run:
    """The stream of one soak: catalog or Delta path, sink, query and folders."""

    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        from stream_sink.spark import local_session

        self.args, self.root = args, root
        self.spark = local_session(
            "soak", conf={"spark.sql.streaming.numRecentProgressUpdates": "600"}
        )
        self.jvm_pid = self.spark.sparkContext._gateway.proc.pid
        self.checkpoint_dir = root / "checkpoints" / "soak"
        self.state_root = root / "state"
        self.state_dir = self.state_root / "soak"
        self.catalog: Any = None
        if args.format == "iceberg":
            self._iceberg()
        else:
            self._delta()
        self.started = time.monotonic()
        self.query: Any = None

    def _iceberg(self) -> None:
        import pyarrow as pa

        from stream_sink.spark import IcebergSink

        a = self.args
        warehouse = str(self.root / "warehouse")
        if a.catalog == "hadoop":
            self.catalog = ss.load_catalog("soak", type="hadoop", warehouse=warehouse)
        else:
            if not a.postgres_url:
                raise SystemExit("--catalog sql needs --postgres-url (or the environment's)")
            self.catalog = ss.load_catalog(
                "soak", type="sql", uri=a.postgres_url, warehouse=warehouse
            )
        ns = f"soak_{os.getpid()}_{int(time.time())}"
        self.catalog.create_namespace(ns)
        schema = pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                pa.field("value", pa.int64(), nullable=False),
                ("ts", pa.timestamp("us", tz="UTC")),
                ("payload", pa.string()),
            ]
        )
        self.name = f"{ns}.t"
        table = self.catalog.create_table(
            self.name, schema, [("bucket", "id", 4)], identifier_fields=["id"]
        )
        self.location = Path(table.metadata.location.removeprefix("file:"))
        self.metadata_dir = self.location / "metadata"
        self.data_dir = self.location / "data"
        maintenance = None
        if not a.no_maintenance:
            maintenance = MaintenanceOptions(
                commit_count=10, max_snapshot_age_ms=60_000, retain_last=5
            )
        self.sink = IcebergSink(
            catalog=self.catalog,
            table=self.name,
            mode="upsert",
            order_by="value",
            sink_id="soak",
            checkpoint_location=str(self.checkpoint_dir),
            state_dir=str(self.state_root),
            maintenance=maintenance,
        )

    def _delta(self) -> None:
        from stream_sink.delta import DeltaMaintenanceOptions
        from stream_sink.spark.foreach_batch.delta import DeltaSink

        self.location = self.root / "delta" / "t"
        self.metadata_dir = self.location / "_delta_log"
        self.data_dir = self.location
        self.sink = DeltaSink(
            path=str(self.location),
            mode="upsert",
            partition_by=["part"],
            equality_fields=["id"],
            order_by="value",
            sink_id="soak",
            checkpoint_location=str(self.checkpoint_dir),
            state_dir=str(self.state_root),
            configuration={
                "delta.checkpointInterval": "10",
                "delta.logRetentionDuration": self.args.delta_log_retention,
                "delta.deletedFileRetentionDuration": self.args.delta_file_retention,
            },
            maintenance=None if self.args.no_maintenance else DeltaMaintenanceOptions(),
        )

    def frame(self) -> Any:
        from pyspark.sql import functions as F

        a = self.args
        df = (
            self.spark.readStream.format("rate")
            .option("rowsPerSecond", a.rate)
            .option("numPartitions", 2)
            .load()
        )
        cols = [
            (F.col("value") % a.keys).alias("id"),
            F.col("value"),
            F.concat(F.lit("payload-"), F.col("value").cast("string")).alias("payload"),
        ]
        if a.format == "delta":  # (DeltaSink does not take timestamp columns on pyspark 4 yet)
            cols.append((F.col("value") % a.keys % 4).cast("int").alias("part"))
        else:
            cols.insert(2, F.col("timestamp").alias("ts"))
        return df.select(*cols)

    def start(self) -> None:
        self.started = time.monotonic()
        self.query = (
            self.frame()
            .writeStream.foreachBatch(self.sink.foreach_batch)
            .option("checkpointLocation", self.sink.spark_checkpoint_location)
            .trigger(processingTime=f"{self.args.trigger_ms} milliseconds")
            .start()
        )

    def stop(self) -> None:
        self.query.stop()
        self.sink.close()

    # --- what the table holds ------------------------------------------------------------

    def delete_files_on_disk(self) -> int:
        if self.args.format == "delta":
            return 0
        return sum(
            1
            for root, _, names in os.walk(self.data_dir)
            for n in names
            if n.endswith(".parquet") and ("delete" in n or "-deletes" in root)
        )

    def table_stats(self) -> dict[str, int]:
        if self.args.format == "delta":
            log_files = len(list(self.metadata_dir.glob("*.json")))
            return {"data_files": 0, "delete_files": 0, "deletes": 0, "snapshots": log_files}
        t = self.catalog.load_table(self.name)
        head = t.current_snapshot()
        s = head.summary if head is not None else {}
        return {
            "data_files": int(s.get("total-data-files", 0)),
            "delete_files": int(s.get("total-delete-files", 0)),
            "deletes": int(s.get("total-equality-deletes", 0))
            + int(s.get("total-position-deletes", 0)),
            "snapshots": len(t.metadata.snapshots),
        }

    def read_back(self) -> Any:
        if self.args.format == "delta":
            from stream_sink.delta import DeltaTable

            return DeltaTable.load(str(self.location)).to_arrow()
        return self.catalog.load_table(self.name).scan().to_arrow()


# --- reporting -----------------------------------------------------------------------------


def in_window(samples: list[Sample], lo_s: float, hi_s: float) -> list[Sample]:
    return [s for s in samples if lo_s <= s.t_s < hi_s]


def median_batch(samples: list[Sample]) -> float:
    times = [t for s in samples for t in s.batch_ms]
    return statistics.median(times) if times else float("nan")


def line(samples: list[Sample], now: Sample) -> str:
    m = now.maintenance
    maint = (
        f"maint {m.get('runs', 0)} runs {m.get('failures', 0)} failed "
        f"{m.get('conflicts', 0)} conflicts {m.get('consecutive_failures', 0)} in a row "
        f"{m.get('backlog_runs', 0)} backlog"
        if m
        else "maint off"
    )
    return (
        f"{now.t_s / 60:6.1f} min  batches {sum(s.batches for s in samples):4d}  "
        f"median {median_batch(samples):6.0f} ms "
        f"({statistics.median([n for s in samples for n in s.batch_rows] or [0]):6.0f} rows) max "
        f"{max((t for s in samples for t in s.batch_ms), default=0):6.0f} ms  "
        f"files {now.data_files_on_disk:5d}+{now.delete_files_on_disk:<5d} "
        f"live {now.live_data_files}+{now.live_delete_files} ({now.live_deletes} deletes)  "
        f"snaps {now.snapshots:4d}  meta {now.metadata_files:4d} files "
        f"{now.metadata_bytes / 2**20:6.1f} MB  state {now.state_bytes / 2**20:5.1f} MB "
        f"({now.state_files} files)  ckpt {now.checkpoint_bytes / 2**20:5.1f} MB  "
        f"rss {now.driver_rss_mb:5.0f}+{now.jvm_rss_mb:5.0f} MB  load {now.load1:4.2f}  {maint}"
    )


def verdict(samples: list[Sample], trigger_ms: int) -> list[tuple[str, bool, str]]:
    """The flat-run criteria: (name, passed, numbers)."""
    end = samples[-1].t_s
    base = median_batch(in_window(samples, 120, 300))
    tail = median_batch(in_window(samples, max(end - 1200, 300), end + 1))
    at5 = min(samples, key=lambda s: abs(s.t_s - 300))
    last = samples[-1]
    out = [
        (
            "median batch, last 20 min <= 1.3x minutes 2-5 and < trigger",
            tail <= 1.3 * base and tail < trigger_ms,
            f"{tail:.0f} ms vs {base:.0f} ms ({tail / base:.2f}x), trigger {trigger_ms} ms",
        )
    ]
    for name, attr in (
        ("data files on disk", "data_files_on_disk"),
        ("metadata folder", "metadata_bytes"),
        ("state folder", "state_bytes"),
    ):
        a, b = getattr(at5, attr), getattr(last, attr)
        ratio = b / a if a else float("inf")
        out.append((f"{name} <= 1.5x minute 5", ratio <= 1.5, f"{a} -> {b} ({ratio:.2f}x)"))
    a, b = at5.driver_rss_mb, last.driver_rss_mb
    out.append(("driver RSS <= 1.25x minute 5", b <= 1.25 * a, f"{a:.0f} -> {b:.0f} MB"))
    a, b = at5.checkpoint_bytes, last.checkpoint_bytes
    out.append(("checkpoint folder <= 1.5x minute 5", b <= 1.5 * a, f"{a} -> {b}"))
    m = last.maintenance
    if m:
        left = m.get("consecutive_failures", 0)
        out.append(
            (
                "no maintenance failure left unretried",
                left == 0,
                f"{m.get('failures', 0)} failed runs, {m.get('runs', 0)} runs, {left} failing now",
            )
        )
    return out


def check_exact(run: Run) -> tuple[bool, str]:
    rows = run.read_back()
    keys = run.args.keys
    ids = rows.column("id").to_pylist()
    values = sorted(rows.column("value").to_pylist())
    if not values:
        return False, "the table is empty"
    top = values[-1]
    n = min(keys, top + 1)
    expected = list(range(top + 1 - n, top + 1))
    dup = len(ids) - len(set(ids))
    values_by_row = rows.column("value").to_pylist()
    mism = sum(1 for i, v in zip(ids, values_by_row, strict=True) if v % keys != i)
    ok = values == expected and dup == 0 and mism == 0
    return ok, f"{len(ids)} rows, {dup} duplicate keys, last value {top}, values exact: {ok}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="soak-"))
    root.mkdir(parents=True, exist_ok=True)
    import pyspark

    print(
        f"soak: {args.format} ({args.catalog if args.format == 'iceberg' else 'path'}), "
        f"{args.minutes} min, {args.rate} rows/s onto {args.keys} keys, trigger "
        f"{args.trigger_ms} ms; {platform.node()} {os.cpu_count()} cpus, python "
        f"{platform.python_version()}, pyspark {pyspark.__version__}, stream_sink from "
        f"{Path(ss.__file__).parent}; dir {root}",
        flush=True,
    )
    run = Run(args, root)
    sampler = Sampler(run, args.sample_s)
    run.start()
    sampler.start()
    deadline = run.started + args.minutes * 60
    printed = 0
    try:
        while time.monotonic() < deadline:
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            if run.query.exception() is not None:
                raise RuntimeError(f"the query failed: {run.query.exception()}")
            s = sampler.samples
            if s and s[-1].t_s >= printed + args.interval_s:
                window = [x for x in s if x.t_s > printed]
                print(line(window, s[-1]), flush=True)
                printed = s[-1].t_s
    finally:
        sampler.stop()
        run.stop()
    samples = sampler.samples
    loads = [s.load1 for s in samples]
    print(
        f"load average (1 min, sampled every {args.sample_s:.0f} s): median "
        f"{statistics.median(loads):.2f}, min {min(loads):.2f}, max {max(loads):.2f}",
        flush=True,
    )
    ok = True
    if samples[-1].t_s >= 330:
        for name, passed, numbers in verdict(samples, args.trigger_ms):
            ok &= passed
            print(f"{'PASS' if passed else 'FAIL'}  {name}: {numbers}", flush=True)
    exact, text = check_exact(run)
    ok &= exact
    print(f"{'PASS' if exact else 'FAIL'}  final table exact: {text}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(s) for s in samples]))
    run.spark.stop()
    if not args.keep and not args.dir:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
