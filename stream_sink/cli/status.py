"""``stream-sink status``: a sink's watermark, pending and staged batches, last commit,
and how far Spark's offsets are ahead (see :mod:`stream_sink.ops.status`); with
``--table`` only, each sink's source position as the table records it, and with
``--complete-up-to`` the version complete up to an event time (:mod:`.source_positions`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from datetime import datetime, timezone

from stream_sink.cli.source_positions import run_positions
from stream_sink.cli.table_commands import add_catalog_options, catalog_properties_of, open_catalog
from stream_sink.delta import DeltaTable
from stream_sink.delta.maintenance import DeltaMaintenanceMetrics
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot
from stream_sink.metrics.transactions import TransactionMetricsSnapshot
from stream_sink.ops.status import SinkStatus, recorded_table, sink_status
from stream_sink.spark.options import resolve_location
from stream_sink.table.catalog import Catalog


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint-location",
        default=None,
        metavar="DIR",
        help="the sink's checkpoint_location (Spark's checkpoints are in "
        "DIR/spark, the sink's in DIR/<sink id>); without it (the default), --table "
        "alone shows what the table records of each sink's stream: the last batch, its "
        "source offsets and event-time watermark, and the resume_from_table value that "
        "continues it",
    )
    parser.add_argument(
        "--sink-id", default=None, help="the sink (default: the only one checkpointing under DIR)"
    )
    parser.add_argument(
        "--table",
        default=None,
        help="the table the sink writes, or a Delta table's path (default: the table "
        "the sink recorded at its first start, else the sink id)",
    )
    parser.add_argument("--branch", default="main", help="the branch the sink commits to")
    parser.add_argument(
        "--starting-offsets",
        action="store_true",
        help="with --table: print only the startingOffsets JSON (Kafka's "
        '{"topic":{"0":123}}) that starts a new query where the sink\'s last commit ended',
    )
    parser.add_argument(
        "--complete-up-to",
        default=None,
        metavar="TIME",
        help="with --table: per sink (or for --sink-id), the oldest snapshot (Delta: "
        "version) complete up to event time TIME, the first whose commit recorded an "
        "event-time watermark at or above it, or that none is yet; TIME is ISO-8601 "
        "(2024-05-02T12:00:00Z, UTC without an offset) or epoch milliseconds; without it "
        "(the default), the recorded positions are printed",
    )
    parser.add_argument(
        "--source",
        type=int,
        default=0,
        metavar="N",
        help="with --starting-offsets: the query's source number N (default 0, the first)",
    )
    add_catalog_options(parser)
    parser.add_argument(
        "--format",
        choices=("table", "jsonl"),
        default="table",
        help="lines for people, or one JSON object",
    )


def run_status(args: argparse.Namespace) -> int:
    """Print the status; 1 (with the reason on stderr) when the sink's table could not be
    read: then nothing is known to be committed or not, and nothing is reported as such."""
    if args.checkpoint_location is None or args.starting_offsets or args.complete_up_to:
        return run_positions(args)
    status = sink_status(
        args.checkpoint_location,
        _catalog(args),
        sink_id=args.sink_id,
        table=args.table,
        branch=args.branch,
        storage_options=catalog_properties_of(args),
    )
    if args.format == "jsonl":
        doc = asdict(status)
        doc.update(offsets_ahead=status.offsets_ahead, in_flight=list(status.in_flight))
        print(json.dumps(doc))
    else:
        print(render(status))
    if status.watermark is None:
        print(
            f"stream-sink: status: cannot read table {status.table} (the reason is above); "
            "whether Spark's acknowledged batches are committed is unknown",
            file=sys.stderr,
        )
        return 1
    return 0


def _catalog(args: argparse.Namespace) -> Catalog | None:
    """The catalog given by options; None (the one the sink recorded) when none is given
    and the sink recorded its catalog's settings (a Delta sink its table's location) or
    ``--table`` is a Delta table's path; else the default ``warehouse``."""
    if not args.warehouse and not args.catalog_uri:
        storage = catalog_properties_of(args)
        if args.table and DeltaTable.is_delta_table(resolve_location(args.table), storage):
            return None
        recorded = recorded_table(args.checkpoint_location, args.sink_id)
        if recorded is not None and recorded.catalog_settings:
            return None
    return open_catalog(args)


def render(s: SinkStatus) -> str:
    mark = (
        f"{s.watermark} (the highest Spark batch id committed to the table)"
        if s.watermark is not None
        else f"unknown: {s.table_error}"
    )
    last = s.last_commit
    unit = "snapshot" if s.delta is None else "version"
    lines = [
        ("sink", s.sink_id),
        ("table", s.table),
        ("catalog", _or_none(s.catalog)),
        ("checkpoint location", s.checkpoint_location),
        ("query id", s.query_id),
        ("watermark", mark),
        (
            "last commit",
            "none yet"
            if last is None
            else f"{unit} {last.snapshot_id} at {_time(last.timestamp_ms)}, watermark "
            f"{last.watermark}",
        ),
        *_delta_lines(s),
        ("source position", _position(s)),
        ("last sink checkpoint", _or_none(s.last_checkpoint_id)),
        ("staged batches", _held(s.staged, "in a completed checkpoint, not yet committed")),
        ("pending batches", _held(s.pending, "durable in the sink, waiting for a checkpoint")),
        (
            "spark offsets",
            f"latest planned batch {_or_none(s.planned[-1] if s.planned else None)}"
            f", latest acknowledged {_or_none(s.acknowledged[-1] if s.acknowledged else None)}",
        ),
        ("offsets ahead of watermark", _or_none(s.offsets_ahead)),
        ("in flight", _ids(s.in_flight) + " (planned by Spark, not acknowledged)"),
    ]
    if s.maintenance is not None:
        lines.append(("maintenance", _maintenance(s.maintenance)))
    if s.transactions is not None:
        lines.append(("held transactions", _transactions(s.transactions)))
    lines.extend(("warning", w) for w in s.warnings)
    width = max(len(k) for k, _ in lines)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in lines)


def _position(s: SinkStatus) -> str:
    p = s.position
    if p is None:
        return "none recorded"
    mark = p.event_time_watermark_ms
    where = p.offsets_json or "unknown offsets"
    text = f"batch {p.batch_id} of query {p.job_id}: {where}"
    text += "" if mark is None else f", event-time watermark {_time(mark)}"
    low, high = p.event_time_low_ms, p.event_time_high_ms
    if low is not None and high is not None:
        text += f", event times {_time(low)} .. {_time(high)}"
    return text


def _transactions(t: TransactionMetricsSnapshot) -> str:
    since = "" if t.oldest_held_batch is None else f" since batch {t.oldest_held_batch}"
    return (
        f"{t.held_transactions} ({t.held_rows} rows){since}; committed "
        f"{t.completed_transactions} complete, {t.forced_transactions} forced out by the bound"
    )


def _delta_lines(s: SinkStatus) -> list[tuple[str, str]]:
    d = s.delta
    if d is None:
        return []
    return [("delta table", f"version {d.version}, {d.files} live files ({d.bytes} bytes)")]


def _held(ids: tuple[int, ...] | None, what: str) -> str:
    if ids is None:
        return "unknown (the table's watermark is unknown)"
    return f"{_ids(ids)} ({what})"


def _maintenance(m: MaintenanceMetricsSnapshot | DeltaMaintenanceMetrics) -> str:
    if isinstance(m, DeltaMaintenanceMetrics):
        return _delta_maintenance(m)
    last = "never" if m.last_success_ms is None else _time(m.last_success_ms)
    text = f"{m.runs} runs, {m.failures} failed, {m.conflicts} yielded; last completed {last}"
    if m.consecutive_failures:
        text += f"; {m.consecutive_failures} in a row not completed: {m.last_error}"
    return text


def _delta_maintenance(m: DeltaMaintenanceMetrics) -> str:
    text = (
        f"{m.runs} runs, {m.failures} failed; {m.compacted_files} files compacted, "
        f"{m.vacuumed_files} vacuumed; {m.backlog_runs} left work behind"
    )
    if m.last_error:
        text += f"; last error: {m.last_error}"
    return text


def _ids(ids: tuple[int, ...]) -> str:
    if not ids:
        return "none"
    if len(ids) > 6:
        return f"{len(ids)} ({ids[0]}..{ids[-1]})"
    return ", ".join(str(i) for i in ids)


def _or_none(v: object) -> str:
    return "none" if v is None else str(v)


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
