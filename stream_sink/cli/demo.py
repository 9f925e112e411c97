"""``stream-sink demo``: a CDC pipeline that survives a crash, end to end, on one machine.

1. Generate a Debezium-style change stream of an ``orders`` table as JSON files.
2. Create ``demo.orders`` (partitioned by day(created_at) and bucket(order_id, 4)).
3. Run the streaming job (:mod:`stream_sink.demo.job`) in a child process; once about half the
   micro-batches are committed, kill it with SIGKILL mid-batch, then start it again
   from the same checkpoint location.
4. Print the snapshots and totals, and check the table equals the expected final state
   (exit 1 when it does not).
5. Print the wall time from the process's start, split into set-up, starting Spark, the
   streaming job and verification (:mod:`stream_sink.demo.timing`).

Every earlier demo artefact (table, checkpoints, state, input) is removed first, so each
run starts fresh. The same code runs on a cluster; only :class:`DemoConfig` differs.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from stream_sink.cli.output import format_table
from stream_sink.commit.iceberg.watermark import (
    MAX_COMMITTED_CHECKPOINT_ID,
    sink_watermarks,
    summary_stamp,
)
from stream_sink.demo.data import ChangeStream, generate, table_rows
from stream_sink.demo.job import (
    SINK_ID,
    TABLE,
    DemoConfig,
    create_table,
    open_catalog,
    write_input,
)
from stream_sink.demo.timing import DemoTimes, JobRun, process_started, read_spark_ready
from stream_sink.exceptions import InvalidOptionError
from stream_sink.io import FileIO
from stream_sink.ops.status import sink_status
from stream_sink.table.catalog import Catalog
from stream_sink.table.snapshots import Snapshot
from stream_sink.tables import IcebergTable

WATERMARK = MAX_COMMITTED_CHECKPOINT_ID
"""The summary key of a snapshot's batch id (:mod:`stream_sink.commit.iceberg.watermark`)."""
POLL_SECONDS = 0.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` subcommand's options (defaults: the embedded local setup)."""
    parser.add_argument("--warehouse", default="warehouse", help="warehouse dir or s3:// URI")
    parser.add_argument(
        "--rows", type=_at_least_one, default=100_000, help="change events to stream"
    )
    parser.add_argument(
        "--files", type=_at_least_one, default=12, help="input files (one per batch)"
    )
    parser.add_argument(
        "--catalog-uri",
        default=None,
        help="SQL catalog (sqlite:///x.db, postgresql+psycopg://...); "
        "default: a Hadoop catalog under --warehouse",
    )
    parser.add_argument(
        "--checkpoint-location",
        default=f"checkpoints/{SINK_ID}",
        help="the sink's checkpoint location (Spark's and the sink's)",
    )
    parser.add_argument(
        "--state-dir", default="state", help="the sink's operator state (RocksDB), local disk"
    )
    parser.add_argument("--input", default="demo/input", help="where the change files go")
    parser.add_argument(
        "--master",
        default=os.environ.get("SPARK_MASTER", "local[2]"),
        help="Spark master URL (default: $SPARK_MASTER, else local[2])",
    )
    parser.add_argument("--no-kill", action="store_true", help="do not kill the job midway")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated changes")
    parser.add_argument(
        "--catalog-prop",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="catalog property, e.g. s3.endpoint=http://minio:9000 (repeatable; default: none)",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Spark setting for the job (repeatable; default: none)",
    )


def run_demo_from_args(args: argparse.Namespace) -> int:
    cfg = DemoConfig(
        warehouse=args.warehouse,
        catalog_uri=args.catalog_uri,
        checkpoint_location=args.checkpoint_location,
        state_dir=args.state_dir,
        input=args.input,
        master=args.master,
        catalog_properties=_pairs(args.catalog_prop),
        spark_conf=_pairs(args.spark_conf),
    )
    return run_demo(
        args.warehouse,
        args.rows,
        config=cfg,
        files=args.files,
        kill=not args.no_kill,
        seed=args.seed,
    )


def run_demo(
    warehouse: str = "warehouse",
    rows: int = 100_000,
    *,
    config: DemoConfig | None = None,
    files: int = 12,
    kill: bool = True,
    seed: int = 7,
    out: TextIO = sys.stdout,
) -> int:
    """Run the demo; 0 when the table equals the expected state, 1 otherwise.
    InvalidOptionError, before anything is touched, for fewer than one row or file or
    more files than rows."""
    check_sizes(rows, files)
    cfg = config or DemoConfig(warehouse=warehouse)
    process_start = process_started()
    started = time.monotonic()
    say = _printer(out, started)
    catalog = open_catalog(cfg)
    say(f"generating {rows:,} change events of an orders table into {files} files")
    stream = generate(rows, files, seed)
    _reset(catalog, cfg)
    write_input(cfg, stream)
    create_table(catalog)
    say(f"table {TABLE} created: partitioned by day(created_at), bucket(order_id, 4)")
    setup_done = time.time()
    runs: list[JobRun] = []
    batches = len(stream.files)
    say(f"Spark numbers the micro-batches from 0: batches 0..{batches - 1}, one per file")
    kill_after = batches // 2 - 1 if kill and batches >= 4 else None
    code = _run_job(cfg, catalog, batches, kill_after, say, runs)
    if code == "killed":
        say(_resume_message(cfg, catalog))
        code = _run_job(cfg, catalog, batches, None, say, runs)
    if code != "done":
        say(f"the streaming job failed; see {_log_path(cfg, len(runs))}")
        return 1
    verify_started = time.time()
    table = catalog.load_table(TABLE)
    assert isinstance(table, IcebergTable)
    print(_summary(table), file=out)
    result = _verify(table, stream, say)
    times = DemoTimes(process_start, setup_done, verify_started, time.time(), tuple(runs))
    print(_time_summary(times), file=out)
    return result


def check_sizes(rows: int, files: int) -> None:
    """InvalidOptionError unless 1 <= files <= rows (each file is one micro-batch of
    at least one change event)."""
    if rows < 1 or files < 1:
        raise InvalidOptionError(
            f"the demo needs at least one change event in at least one file, got "
            f"--rows {rows} --files {files}; e.g. --rows 2000 --files 4"
        )
    if files > rows:
        raise InvalidOptionError(
            f"--files {files} is more than --rows {rows}: each file (one micro-batch) "
            "holds at least one change event; give fewer files or more rows"
        )


def _at_least_one(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _run_job(
    cfg: DemoConfig,
    catalog: Catalog,
    batches: int,
    kill_after: int | None,
    say: Callable[[str], None],
    runs: list[JobRun],
) -> str:
    """Run the job process; "done", "killed" (by us) or "failed". Appends its timing
    to ``runs``."""
    attempt = len(runs) + 1
    log_path = _log_path(cfg, attempt)
    ready_path = f"{os.path.splitext(log_path)[0]}.spark-ready.json"
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    if os.path.exists(ready_path):
        os.remove(ready_path)
    say(f"starting the Spark job (run {attempt}, log: {log_path})")
    launched = time.time()
    try:
        return _watch_job(cfg, catalog, batches, kill_after, say, log_path, ready_path)
    finally:
        runs.append(JobRun(launched, read_spark_ready(ready_path), time.time()))


def _watch_job(
    cfg: DemoConfig,
    catalog: Catalog,
    batches: int,
    kill_after: int | None,
    say: Callable[[str], None],
    log_path: str,
    ready_path: str,
    command: Sequence[str] | None = None,
) -> str:
    """Run the job process (``command``, default the demo's job) until it ends, or kill
    it once the table's watermark reaches ``kill_after``. What the kill message names is
    read from the table after the process is dead: a batch committed while the signal
    was on its way is reported, not the one that triggered the kill."""
    argv = command or [sys.executable, "-m", "stream_sink.demo.job", cfg.to_json(), ready_path]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT)
        seen = _committed(catalog)
        while proc.poll() is None:
            time.sleep(POLL_SECONDS)
            seen = _report(catalog, seen, batches, say)
            if kill_after is not None and _watermark(catalog) >= kill_after:
                time.sleep(random.uniform(0.2, 1.5))  # land somewhere inside the next batch
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                seen = _report(catalog, seen, batches, say)
                say(f"killed the job with SIGKILL; {_held_when_killed(_watermark(catalog))}")
                return "killed"
        _report(catalog, seen, batches, say)
    return "done" if proc.returncode == 0 else "failed"


def _held_when_killed(mark: int) -> str:
    if mark < 0:
        return "when it died the table held no batch yet"
    return f"when it died the table held batches 0..{mark} (its watermark: batch {mark})"


def _committed(catalog: Catalog) -> list[Snapshot]:
    return catalog.load_table(TABLE).snapshots()


def _report(
    catalog: Catalog, seen: list[Snapshot], batches: int, say: Callable[[str], None]
) -> list[Snapshot]:
    now = _committed(catalog)
    for snap in now[len(seen) :]:
        s = snap.summary
        say(
            f"batch {_stamp(s):>3} of 0..{batches - 1} committed: "
            f"{s.get('operation', '?')}, +{s.get('added-data-files', '0')} data files, "
            f"+{s.get('added-delete-files', '0')} delete files, "
            f"{int(s.get('total-records', '0')):,} records in data files"
        )
    return now


def _resume_message(cfg: DemoConfig, catalog: Catalog) -> str:
    """What the restart starts from: the table's watermark, the batches the sink holds
    durably but had not committed, and the batch Spark runs next."""
    status = sink_status(cfg.checkpoint_location, catalog, sink_id=SINK_ID, table=TABLE)
    mark = status.watermark if status.watermark is not None else -1
    held = (*(status.staged or ()), *(status.pending or ()))
    acked = status.acknowledged[-1] if status.acknowledged else -1
    parts = [
        f"restarting the job from {cfg.checkpoint_location}: the table's watermark is batch {mark}"
    ]
    if held:
        parts.append(
            f"batches {', '.join(map(str, held))} are durable in the sink's state "
            "and are committed first"
        )
    parts.append(
        f"Spark resumes with batch {acked + 1}"
        + (" again: it had started it before the kill" if acked + 1 in status.in_flight else "")
    )
    return "; ".join(parts)


def _watermark(catalog: Catalog) -> int:
    """The demo sink's watermark (-1 before its first commit), read as ``stream-sink
    table show`` reads every sink's: other writers' stamps on the table do not count."""
    marks = sink_watermarks(catalog.load_table(TABLE).metadata)
    return next((w.watermark for w in marks if w.sink == SINK_ID), -1)


def _stamp(summary: Mapping[str, str]) -> int:
    """The batch id a snapshot records; -1 for one the sink did not stamp."""
    stamp = summary_stamp(summary)
    return -1 if stamp is None else stamp


def _summary(table: IcebergTable) -> str:
    rows = []
    for snap in table.snapshots():
        s = snap.summary
        rows.append(
            [
                str(snap.snapshot_id),
                _stamp(s),
                s.get("operation", "?"),
                int(s.get("added-data-files", "0")),
                int(s.get("added-delete-files", "0")),
                int(s.get("total-records", "0")),
            ]
        )
    snapshots = format_table(
        ["snapshot", "batch", "operation", "+data files", "+delete files", "records in files"],
        rows,
    )
    last = table.current_snapshot()
    totals = last.summary if last is not None else {}
    live = table.scan().to_arrow().num_rows
    overview = format_table(
        ["", "value"],
        [
            ["snapshots", len(rows)],
            ["live rows (deletes applied)", live],
            ["data files", int(totals.get("total-data-files", "0"))],
            ["delete files", int(totals.get("total-delete-files", "0"))],
            ["equality deletes", int(totals.get("total-equality-deletes", "0"))],
            ["position deletes", int(totals.get("total-position-deletes", "0"))],
        ],
    )
    return f"\nSnapshots of {table.name}\n{snapshots}\n\nTable {table.name}\n{overview}\n"


def _time_summary(times: DemoTimes) -> str:
    table = format_table(["phase", "seconds", "share"], times.rows())
    return f"\nWall time of this demo\n{table}\n"


def _verify(table: IcebergTable, stream: ChangeStream, say: Callable[[str], None]) -> int:
    got = table_rows(table.scan().to_arrow())
    expected = list(stream.expected)
    if got == expected:
        say(
            f"check passed: {TABLE} equals the expected final state "
            f"({len(expected):,} orders, every change exactly once)"
        )
        return 0
    missing = [r for r in expected if r not in got][:3]
    extra = [r for r in got if r not in expected][:3]
    say(
        f"CHECK FAILED: {len(got):,} rows, expected {len(expected):,}; "
        f"e.g. missing {missing}, unexpected {extra}"
    )
    return 1


def _reset(catalog: Catalog, cfg: DemoConfig) -> None:
    """Remove what an earlier demo left: table, checkpoints, state, input."""
    if catalog.table_exists(TABLE):
        catalog.drop_table(TABLE, purge=True)
    for location in (cfg.checkpoint_location, os.path.join(cfg.state_dir, SINK_ID), cfg.input):
        io = FileIO.for_location(location, cfg.catalog_properties)
        if io.exists(location):
            io.delete_dir(location)


def _log_path(cfg: DemoConfig, attempt: int) -> str:
    return os.path.join(cfg.log_dir, f"job-run-{attempt}.log")


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"stream-sink demo: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


class _Say:
    def __init__(self, out: TextIO, started: float) -> None:
        self.out, self.started = out, started

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {message}", file=self.out, flush=True)


def _printer(out: TextIO, started: float) -> _Say:
    return _Say(out, started)
