"""``stream-sink status --table T`` without a checkpoint location: what the table itself
records of each sink's stream (:mod:`stream_sink.ops.source_positions`), readable when the
Spark checkpoint is gone; ``--starting-offsets`` prints the ``startingOffsets`` JSON
that starts a new query where the sink's last commit ended, and ``--complete-up-to TIME``
the oldest version of each sink complete up to event time TIME (or that none is yet)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from datetime import datetime, timezone

from stream_sink.cli.delta_commands import is_delta_path
from stream_sink.cli.table_commands import catalog_properties_of, open_catalog
from stream_sink.cli.table_paths import iceberg_table_at
from stream_sink.delta import DeltaTable
from stream_sink.exceptions import InvalidOptionError
from stream_sink.ops.source_positions import (
    SourcePosition,
    complete_up_to,
    iso_time,
    parse_event_time,
    sink_positions,
)
from stream_sink.table.table import Table


def run_positions(args: argparse.Namespace) -> int:
    """Print the sinks' recorded positions (or one's starting offsets); 1 when none."""
    if not args.table:
        raise InvalidOptionError(
            "stream-sink status needs --checkpoint-location (the sink's progress) or "
            "--table (what the table records of each sink's stream)"
        )
    until = None if args.complete_up_to is None else parse_event_time(args.complete_up_to)
    table = _open(args)
    found = [p for p in sink_positions(table) if _matches(p, args.sink_id)]
    if not found:
        who = f"sink {args.sink_id}" if args.sink_id else "any sink"
        print(
            f"stream-sink: status: table {args.table} records no source position of {who} "
            "(its commits were made without the query's offsets, or before this version)",
            file=sys.stderr,
        )
        return 1
    if args.starting_offsets:
        if len(found) > 1:
            raise InvalidOptionError(
                f"table {args.table} records the positions of several sinks "
                f"({', '.join(p.sink_id for p in found)}): pass --sink-id"
            )
        print(found[0].starting_offsets(args.source))
        return 0
    unit = "version" if isinstance(table, DeltaTable) else "snapshot"
    if until is not None:
        answers = [(p, complete_up_to(table, p.sink_id, until, args.branch)) for p in found]
        if args.format == "jsonl":
            for p, complete in answers:
                print(json.dumps(_completeness_doc(p, complete, until)))
        else:
            print(render_completeness(args.table, answers, until, unit))
        return 0
    if args.format == "jsonl":
        for p in found:
            doc = asdict(p)
            doc.update(resume_from_table=p.point, sources=p.sources)
            print(json.dumps(doc))
        return 0
    print(render(args.table, found, unit))
    return 0


def render_completeness(
    table: str,
    answers: list[tuple[SourcePosition, SourcePosition | None]],
    until: int,
    unit: str,
) -> str:
    """Per sink: the oldest version complete up to ``until``, or why none is yet."""
    lines = [("table", table), ("complete up to", f"{iso_time(until)} ({until})")]
    for last, complete in answers:
        lines.append(("sink", last.sink_id))
        if complete is None:
            mark = last.event_time_watermark_ms
            why = (
                "no commit recorded an event-time watermark (does the query use withWatermark?)"
                if mark is None
                else f"the last recorded event-time watermark is {iso_time(mark)} ({mark})"
            )
            lines.append(("  complete in", f"none yet: {why}"))
            continue
        where = f"{unit} {complete.version}" if complete.version is not None else "unknown"
        if complete.timestamp_ms is not None:
            where += f" at {_time(complete.timestamp_ms)}"
        mark = complete.event_time_watermark_ms
        lines += [
            ("  complete in", f"{where} and every later one"),
            ("  batch", f"{complete.batch_id} of query {complete.job_id}"),
            ("  event-time watermark", f"{iso_time(mark)} ({mark})"),
        ]
    width = max(len(k) for k, _ in lines)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in lines)


def _completeness_doc(
    last: SourcePosition, complete: SourcePosition | None, until: int
) -> dict[str, object]:
    return {
        "sink_id": last.sink_id,
        "complete_up_to_ms": until,
        "complete_up_to": iso_time(until),
        "complete": complete is not None,
        "version": None if complete is None else complete.version,
        "timestamp_ms": None if complete is None else complete.timestamp_ms,
        "batch_id": None if complete is None else complete.batch_id,
        "job_id": None if complete is None else complete.job_id,
        "event_time_watermark_ms": (
            last.event_time_watermark_ms if complete is None else complete.event_time_watermark_ms
        ),
    }


def render(table: str, positions: list[SourcePosition], unit: str) -> str:
    lines = [("table", table)]
    for p in positions:
        recorded = f"{unit} {p.version}" if p.version is not None else "unknown"
        if p.timestamp_ms is not None:
            recorded += f" at {_time(p.timestamp_ms)}"
        mark = p.event_time_watermark_ms
        lines += [
            ("sink", p.sink_id),
            ("  last batch", f"{p.batch_id} of query {p.job_id}"),
            ("  resume_from_table", p.point),
            ("  source offsets", p.offsets_json or "unknown (not readable when committed)"),
            ("  event-time watermark", "none" if mark is None else f"{mark} ({_time(mark)})"),
            ("  event times", _event_times(p)),
            ("  recorded by", recorded),
        ]
    width = max(len(k) for k, _ in lines)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in lines)


def _event_times(p: SourcePosition) -> str:
    """The low and high event time of the commit's data files, when it recorded them."""
    low, high = p.event_time_low_ms, p.event_time_high_ms
    if low is None or high is None:
        return "none recorded (no event_time_column, or files without its statistics)"
    return f"{iso_time(low)} .. {iso_time(high)} (of the last commit's data files)"


def _open(args: argparse.Namespace) -> Table | DeltaTable:
    storage = catalog_properties_of(args)
    if is_delta_path(args.table):
        return DeltaTable.load(args.table, storage_options=storage)
    return iceberg_table_at(args.table) or open_catalog(args).load_table(args.table)


def _matches(position: SourcePosition, sink_id: str | None) -> bool:
    """All sinks without ``sink_id``; else that sink, or its table of a routed sink."""
    if sink_id is None:
        return True
    return position.sink_id == sink_id or position.sink_id.startswith(f"{sink_id}=")


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
