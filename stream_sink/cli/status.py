"""``stream-sink status``: a sink's watermark, pending and staged batches, last commit,
and how far Spark's offsets are ahead (see :mod:`stream_sink.ops.status`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from datetime import datetime, timezone

from stream_sink.cli.table_commands import add_catalog_options, open_catalog
from stream_sink.ops.status import SinkStatus, sink_status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--checkpoint-location",
        required=True,
        metavar="DIR",
        help="the sink's checkpoint_location (Spark's checkpoints are in "
        "DIR/spark, the sink's in DIR/<sink id>)",
    )
    parser.add_argument(
        "--sink-id", default=None, help="the sink (default: the only one checkpointing under DIR)"
    )
    parser.add_argument(
        "--table",
        default=None,
        help="the table the sink writes (default: the sink id, which is "
        "the table name unless sink_id= was given)",
    )
    parser.add_argument("--branch", default="main", help="the branch the sink commits to")
    add_catalog_options(parser)
    parser.add_argument(
        "--format",
        choices=("table", "jsonl"),
        default="table",
        help="lines for people, or one JSON object",
    )


def run_status(args: argparse.Namespace) -> int:
    catalog = open_catalog(args)
    status = sink_status(
        args.checkpoint_location,
        catalog,
        sink_id=args.sink_id,
        table=args.table,
        branch=args.branch,
    )
    if args.format == "jsonl":
        doc = asdict(status)
        doc.update(offsets_ahead=status.offsets_ahead, in_flight=list(status.in_flight))
        print(json.dumps(doc))
    else:
        print(render(status))
    return 0


def render(s: SinkStatus) -> str:
    mark = s.watermark if s.watermark is not None else f"unknown: {s.table_error}"
    last = s.last_commit
    lines = [
        ("sink", s.sink_id),
        ("table", s.table),
        ("checkpoint location", s.checkpoint_location),
        ("query id", s.query_id),
        ("watermark", f"{mark} (the highest Spark batch id committed to the table)"),
        (
            "last commit",
            "none yet"
            if last is None
            else f"snapshot {last.snapshot_id} at {_time(last.timestamp_ms)}, watermark "
            f"{last.watermark}",
        ),
        ("last sink checkpoint", _or_none(s.last_checkpoint_id)),
        ("staged batches", _ids(s.staged) + " (in a completed checkpoint, not yet committed)"),
        ("pending batches", _ids(s.pending) + " (durable in the sink, waiting for a checkpoint)"),
        (
            "spark offsets",
            f"latest planned batch {_or_none(s.planned[-1] if s.planned else None)}"
            f", latest acknowledged {_or_none(s.acknowledged[-1] if s.acknowledged else None)}",
        ),
        ("offsets ahead of watermark", _or_none(s.offsets_ahead)),
        ("in flight", _ids(s.in_flight) + " (planned by Spark, not acknowledged)"),
    ]
    width = max(len(k) for k, _ in lines)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in lines)


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
