"""``stream-sink table consistent``: which snapshot of each table a routed sink writes
to read so that every table shows the same checkpoint
(:func:`stream_sink.commit.iceberg.consistent.routed_snapshots`); read each with
``stream-sink read TABLE --snapshot-id ID``."""

from __future__ import annotations

import argparse
from typing import Any

from stream_sink.commit.iceberg.consistent import routed_snapshots
from stream_sink.table.catalog import Catalog


def add_consistent_parser(tsub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    p = tsub.add_parser(
        "consistent",
        formatter_class=formatter,
        help="the snapshot of each of a routed sink's tables at the newest checkpoint all reached",
    )
    p.add_argument("tables", nargs="+", help="the sink's tables, as its routing values name them")
    p.add_argument("--job-id", required=True, help="the streaming query's id (the job)")
    p.add_argument("--sink-id", required=True, help="the sink's id (its sink_id option)")


def consistent_rows(catalog: Catalog, args: argparse.Namespace) -> list[dict[str, Any]]:
    read = routed_snapshots(catalog, args.job_id, args.sink_id, args.tables)
    return [
        {
            "table": t.table,
            "snapshot_id": t.version,
            "stamped_checkpoint": t.checkpoint_id,
            "read_checkpoint": read.checkpoint_id,
            "touched_by_it": t.exact,
        }
        for t in read.tables
    ]
