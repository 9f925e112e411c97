"""``stream-sink table show|snapshots|files`` and ``stream-sink read`` on a Delta table:
TABLE is then the table's path (a directory holding ``_delta_log``); ``--snapshot-id``
names a Delta version."""

from __future__ import annotations

import argparse
import json
from typing import Any

from stream_sink.cli.output import format_table
from stream_sink.delta import AddFile, CommitInfo, DeltaTable, RemoveFile, Txn
from stream_sink.delta.stats import num_records


def is_delta_path(table: str) -> bool:
    return ("/" in table or table.startswith(".")) and DeltaTable.is_delta_table(table)


def run_delta_table(args: argparse.Namespace) -> int:
    table = DeltaTable.load(args.table)
    cmd = args.table_command
    if cmd == "show":
        return _emit([_show(table)], args.format, vertical=True)
    if cmd == "snapshots":
        return _emit(version_rows(table), args.format)
    version = getattr(args, "snapshot_id", None)
    snapshot = table.snapshot if version is None else table.snapshot_at(version)
    rows = [
        {
            "path": a.path,
            "partition": a.partition_values or "-",
            "records": num_records(a.stats),
            "bytes": a.size,
        }
        for a in sorted(snapshot.files.values(), key=lambda a: a.path)
    ]
    return _emit(rows, args.format)


def _show(table: DeltaTable) -> dict[str, Any]:
    s = table.snapshot
    return {
        "table": table.location,
        "format": "delta",
        "version": s.version,
        "protocol": s.protocol.to_json(),
        "schema": ", ".join(f"{f.name}: {f.type}" for f in s.arrow_schema),
        "partition_columns": list(s.partition_columns),
        "configuration": dict(s.configuration),
        "files": len(s.files),
        "txn": {t.app_id: t.version for t in s.txns.values()},
    }


def version_rows(table: DeltaTable) -> list[dict[str, Any]]:
    rows = []
    for v in table.log.list_commits():
        actions = table.log.read_commit(v)
        info = next((a.values for a in actions if isinstance(a, CommitInfo)), {})
        txns = [a for a in actions if isinstance(a, Txn)]
        rows.append(
            {
                "version": v,
                "operation": info.get("operation"),
                "added_files": sum(1 for a in actions if isinstance(a, AddFile)),
                "removed_files": sum(1 for a in actions if isinstance(a, RemoveFile)),
                "txn": ", ".join(f"{t.app_id}={t.version}" for t in txns) or None,
            }
        )
    return rows


def run_delta_read(args: argparse.Namespace) -> int:
    table = DeltaTable.load(args.table, version=args.snapshot_id)
    data = table.to_arrow()
    if args.columns:
        data = data.select([c.strip() for c in args.columns.split(",")])
    total = data.num_rows
    if args.format == "parquet":
        import sys

        import pyarrow.parquet as pq

        pq.write_table(data, args.output or sys.stdout.buffer)
        return 0
    if args.limit:
        data = data.slice(0, args.limit)
    rows = data.to_pylist()
    code = _emit(rows, args.format)
    if args.format == "table" and total > len(rows):
        print(f"({len(rows):,} of {total:,} rows shown; --limit 0 shows all)")
    return code


def _emit(rows: list[dict[str, Any]], fmt: str, vertical: bool = False) -> int:
    if fmt == "jsonl":
        for r in rows:
            print(json.dumps(r, default=str, ensure_ascii=False))
        return 0
    if not rows:
        print("(no rows)")
        return 0
    if vertical:
        for key, value in rows[0].items():
            print(f"{key}: {value}")
        return 0
    headers = list(rows[0])
    print(format_table(headers, [[r.get(h) for h in headers] for r in rows]))
    return 0
