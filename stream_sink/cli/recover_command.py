"""``stream-sink table recover TABLE [--to-version N] [--yes]``.

Without ``--to-version``: the table's metadata versions, readable or not (and why).
With it: what pointing the catalog back to version N would lose (the versions after
it, the snapshots they added, the sink batches in those snapshots); ``--yes`` then does
it (see :mod:`stream_sink.table.recovery`). Exit 0 when done or shown, 1 on an error.
"""

from __future__ import annotations

import argparse
from typing import Any

from stream_sink.cli.output import format_table
from stream_sink.commit.iceberg.watermark import MAX_COMMITTED_CHECKPOINT_ID, OPERATOR_ID
from stream_sink.table.catalog import Catalog
from stream_sink.table.recovery import metadata_versions, plan_recovery, recover


def add_recover_parser(
    tsub: Any, formatter: type[argparse.HelpFormatter] = argparse.HelpFormatter
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = tsub.add_parser(
        "recover",
        formatter_class=formatter,
        help="list metadata versions; point the catalog back to a readable one",
    )
    p.add_argument("table", help="table name such as db.events")
    p.add_argument(
        "--to-version",
        type=int,
        default=None,
        help="metadata version to go back to (default: only list the versions)",
    )
    p.add_argument(
        "--yes", action="store_true", help="do it (default: only show what would be lost)"
    )
    return p


def run_recover(catalog: Catalog, args: argparse.Namespace) -> int:
    if args.to_version is None:
        return _list_versions(catalog, args.table)
    plan = plan_recovery(catalog, args.table, args.to_version)
    target = plan.target.metadata
    assert target is not None
    head = target.current_snapshot()
    print(
        f"table {plan.table}: point the catalog back to metadata version "
        f"{plan.target.version} ({plan.target.location})"
    )
    rows = head.summary.get("total-records") if head else "0"
    print(f"  current snapshot afterwards: {head.snapshot_id if head else None} ({rows} rows)")
    for v in plan.dropped:
        state = "readable" if v.readable else f"UNREADABLE: {v.error}"
        print(f"  dropped: metadata version {v.version} ({state})")
    if plan.lost_snapshots:
        print(f"  snapshots lost ({len(plan.lost_snapshots)}):")
        lines = [
            [
                s.snapshot_id,
                s.operation,
                s.summary.get("added-records"),
                s.summary.get(OPERATOR_ID),
                s.summary.get(MAX_COMMITTED_CHECKPOINT_ID),
            ]
            for s in plan.lost_snapshots
        ]
        print(format_table(["snapshot_id", "operation", "added_records", "sink", "batch"], lines))
        print(
            "  batches a sink committed in these snapshots are not sent again: replay them "
            "from the source"
        )
    if plan.unreadable_dropped:
        print("  unreadable versions may have added snapshots that cannot be listed")
    if not args.yes:
        print("nothing changed: add --yes to do it")
        return 0
    location = recover(catalog, plan)
    print(f"done: the table's metadata is now {location}")
    return 0


def _list_versions(catalog: Catalog, table: str) -> int:
    rows = []
    for v in metadata_versions(catalog, table):
        meta = v.metadata
        head = meta.current_snapshot() if meta is not None else None
        rows.append(
            [
                v.version,
                "yes" if v.readable else "NO",
                len(meta.snapshots) if meta is not None else None,
                head.snapshot_id if head else None,
                v.location if v.readable else v.error,
            ]
        )
    print(
        format_table(["version", "readable", "snapshots", "current_snapshot", "file / error"], rows)
    )
    return 0
