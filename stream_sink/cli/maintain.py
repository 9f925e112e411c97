"""``stream-sink maintain TABLE``: compaction, equality-delete conversion, snapshot
expiry, orphan cleanup and manifest rewriting from the command line.

The run holds the table's maintenance lock (shared with sinks' in-job maintenance); a
REST table's lock lives where its ``stream-sink.maintenance.lock-location`` property
says, which ``--lock-location`` records when the table names none. Actions run in a
fixed order: rewrite data files (then dangling deletes), convert equality deletes,
rewrite manifests, expire snapshots, remove orphan files.
Exit 0 when done, 1 with a one-line reason when it gave up (lock held, conflict
after re-planning, bad duration, missing table).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from stream_sink.cli.output import format_table
from stream_sink.cli.table_commands import add_catalog_options, open_catalog
from stream_sink.exceptions import InvalidOptionError, StreamSinkError, UnsupportedError
from stream_sink.io import FileIO
from stream_sink.maintenance import Maintenance
from stream_sink.maintenance.inventory import inventory
from stream_sink.maintenance.lease_lock import adopt_lock_location
from stream_sink.maintenance.lock import LOCK_LOCATION, uses_lease_log
from stream_sink.spark.options import resolve_location
from stream_sink.table.table import Table

ACTIONS = (
    "rewrite_data_files",
    "convert_equality_deletes",
    "rewrite_manifests",
    "expire_snapshots",
    "remove_orphan_files",
)
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    """``0s``, ``90s``, ``15m``, ``6h``, ``3d`` (and ``ms``) -> milliseconds."""
    m = _DURATION.match(text)
    if not m:
        raise InvalidOptionError(
            f"duration {text!r} is not a number followed by ms, s, m, h or d (e.g. 15m, 3d)"
        )
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="the table to maintain, e.g. db.events")
    p.add_argument(
        "--rewrite-data-files",
        action="store_true",
        help="compact small files and files with deletes (then drop dangling delete files)",
    )
    p.add_argument(
        "--convert-equality-deletes",
        action="store_true",
        help="replace equality deletes by position deletes (pyiceberg can then read the table)",
    )
    p.add_argument(
        "--expire-snapshots",
        action="store_true",
        help="expire old snapshots and delete the files only they used",
    )
    p.add_argument(
        "--older-than",
        default=None,
        metavar="DURATION",
        help="expire snapshots older than this, e.g. 0s, 90s, 15m, 6h, 3d (default: "
        "the table's history.expire.max-snapshot-age-ms, 5 days)",
    )
    p.add_argument(
        "--retain-last",
        type=int,
        default=1,
        metavar="N",
        help="snapshots of each branch always kept by --expire-snapshots",
    )
    p.add_argument(
        "--remove-orphan-files",
        action="store_true",
        help="delete files under the table location that no metadata reaches",
    )
    p.add_argument(
        "--orphan-older-than",
        default="3d",
        metavar="DURATION",
        help="only orphans older than this are deleted",
    )
    p.add_argument(
        "--rewrite-manifests",
        action="store_true",
        help="cluster the data manifests of the current snapshot",
    )
    p.add_argument("--all", action="store_true", help="every action above, in order")
    p.add_argument(
        "--target-file-size",
        type=int,
        default=None,
        metavar="BYTES",
        help="compacted file size (default: write.target-file-size-bytes)",
    )
    p.add_argument(
        "--min-input-files",
        type=int,
        default=5,
        metavar="N",
        help="a partition's small files are compacted once it has this many",
    )
    p.add_argument(
        "--lock-location",
        default=None,
        metavar="DIR",
        help=f"a table whose maintenance lock is a lease log (a REST catalog's) and names no "
        f"{LOCK_LOCATION}: record DIR (s3:// or local, writable by every maintainer) as that "
        "property, as a sink's in-job maintenance does, and take the lock there; sinks and "
        "later runs share it. A location the table already names is kept (default: none)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    add_catalog_options(p)


def run_maintain(args: argparse.Namespace) -> int:
    chosen = [a for a in ACTIONS if args.all or getattr(args, a)]
    if not chosen:
        print(
            "stream-sink maintain: gave up: no action chosen (use --all or e.g. "
            "--rewrite-data-files)",
            file=sys.stderr,
        )
        return 1
    try:
        expire_ms = parse_duration_ms(args.older_than) if args.older_than else None
        orphan_ms = parse_duration_ms(args.orphan_older_than)
        table = open_catalog(args).load_table(args.table)
        now = int(time.time() * 1000)
        m = Maintenance(table)
        before = table_stats(table)
        if args.dry_run:
            report = {
                "table": table.name,
                "dry_run": True,
                "before": before,
                "plan": _plan(m, chosen, args, now, orphan_ms),
            }
        else:
            started = time.perf_counter()
            m = Maintenance(with_lock_location(table, args.lock_location))
            with m.lock("cli"):
                results = _run(m, chosen, args, now, expire_ms, orphan_ms)
            report = {
                "table": table.name,
                "dry_run": False,
                "before": before,
                "after": table_stats(table.refresh()),
                "results": results,
                "duration_s": round(time.perf_counter() - started, 3),
            }
    except StreamSinkError as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"stream-sink maintain: gave up: {type(e).__name__}: {reason}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, default=str))
    else:
        print(_human(report))
    return 0


# --- running ------------------------------------------------------------------------------


def with_lock_location(table: Table, given: str | None) -> Table:
    """``table`` with the lock location the run takes its lock in: the one it names, else
    ``given`` recorded as its property (``adopt_lock_location``). UnsupportedError saying
    what to pass when its lock is a lease log and neither names one."""
    if not uses_lease_log(table):
        if given is not None:
            _note(f"table {table.name} keeps its lock without a lease log: --lock-location unused")
        return table
    named = table.properties.get(LOCK_LOCATION)
    location = resolve_location(given) if given is not None else None
    if named:
        if location is not None and location != named.rstrip("/"):
            _note(f"table {table.name} names {LOCK_LOCATION}={named}, kept (never replaced)")
        return table
    if location is None:
        raise UnsupportedError(
            f"table {table.name}: its maintenance lock is a lease log in the directory the "
            f"table property {LOCK_LOCATION} names, and it names none yet (a sink with "
            "in-job maintenance records one at its first run); pass --lock-location DIR (s3:// "
            "or local, writable by every maintainer: recorded as the property, shared with "
            "the sinks from then on), or set the property yourself (ALTER TABLE ... SET "
            "TBLPROPERTIES)"
        )
    if not FileIO.for_location(location, table.io.properties).supports_put_if_absent:
        raise UnsupportedError(
            f"--lock-location {given}: a lease log needs a store with put-if-absent; use an "
            "s3:// or local directory"
        )
    return adopt_lock_location(table, location)


def _note(text: str) -> None:
    print(f"stream-sink maintain: {text}", file=sys.stderr)


def _run(
    m: Maintenance,
    chosen: list[str],
    args: argparse.Namespace,
    now: int,
    expire_ms: int | None,
    orphan_ms: int,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    quiet = args.json
    if "rewrite_data_files" in chosen:
        with _progress("rewriting data files", quiet) as progress:
            r = m.rewrite_data_files(args.target_file_size, args.min_input_files, progress=progress)
        out.append(r.to_dict())
        out.append(m.remove_dangling_deletes().to_dict())
    if "convert_equality_deletes" in chosen:
        with _progress("converting equality deletes", quiet) as progress:
            out.append(m.convert_equality_deletes(progress).to_dict())
    if "rewrite_manifests" in chosen:
        out.append(m.rewrite_manifests().to_dict())
    if "expire_snapshots" in chosen:
        older = now - expire_ms if expire_ms is not None else None
        out.append(m.expire_snapshots(older, args.retain_last).to_dict())
    if "remove_orphan_files" in chosen:
        d = m.remove_orphan_files(now - orphan_ms).to_dict()
        d["orphans"] = len(d["orphans"])
        d["empty_dirs"] = len(d["empty_dirs"])
        out.append(d)
    return out


def _plan(
    m: Maintenance, chosen: list[str], args: argparse.Namespace, now: int, orphan_ms: int
) -> dict[str, Any]:
    plan: dict[str, Any] = {}
    table = m.table
    if "rewrite_data_files" in chosen:
        plan["rewrite_data_files"] = m.plan_rewrite_data_files(
            args.target_file_size, args.min_input_files
        ).describe()
    if "convert_equality_deletes" in chosen:
        eq = inventory(table, table.current_snapshot()).equality_deletes
        plan["convert_equality_deletes"] = {
            "equality_delete_files": len(eq),
            "equality_deletes": sum(f.data_file.record_count for f in eq),
        }
    if "expire_snapshots" in chosen:
        plan["expire_snapshots"] = {
            "snapshots": len(table.metadata.snapshots),
            "older_than": args.older_than or "history.expire.max-snapshot-age-ms",
            "retain_last": args.retain_last,
        }
    if "rewrite_manifests" in chosen:
        manifests = inventory(table, table.current_snapshot()).manifests
        plan["rewrite_manifests"] = {"manifests": len(manifests)}
    if "remove_orphan_files" in chosen:
        r = m.remove_orphan_files(now - orphan_ms, dry_run=True)
        plan["remove_orphan_files"] = {
            "orphans": list(r.orphans),
            "bytes": r.orphan_bytes,
            "protected": r.protected,
            "empty_dirs": len(r.empty_dirs),
        }
    return plan


@contextmanager
def _progress(what: str, quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr (only on a terminal and without --json)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TimeRemainingColumn

    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        yield None
        return
    with Progress(
        f"[bold]{what}",
        BarColumn(),
        TaskProgressColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(what, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


# --- reporting ----------------------------------------------------------------------------


def table_stats(table: Table) -> dict[str, int]:
    snap = table.current_snapshot()
    s = snap.summary if snap else {}
    return {
        "snapshots": len(table.metadata.snapshots),
        "data_files": int(s.get("total-data-files", 0)),
        "delete_files": int(s.get("total-delete-files", 0)),
        "equality_deletes": int(s.get("total-equality-deletes", 0)),
        "position_deletes": int(s.get("total-position-deletes", 0)),
        "records": int(s.get("total-records", 0)),
        "bytes": int(s.get("total-files-size", 0)),
    }


def _human(report: dict[str, Any]) -> str:
    before = report["before"]
    note = " (dry run: nothing changed)" if report["dry_run"] else ""
    lines = [f"table {report['table']}{note}"]
    if report["dry_run"]:
        lines.append(json.dumps(report["plan"], indent=2, default=str))
        return "\n".join(lines)
    after = report["after"]
    rows = [[k, before[k], after[k]] for k in before]
    lines.append(format_table(["", "before", "after"], rows))
    for r in report["results"]:
        details = ", ".join(f"{k}={v}" for k, v in r.items() if k not in ("action", "duration_ms"))
        lines.append(f"{r['action']}: {details} ({r.get('duration_ms', 0) / 1000:.2f} s)")
    lines.append(f"done in {report['duration_s']:.2f} s")
    return "\n".join(lines)
