"""``stream-sink table show|snapshots|files`` and ``stream-sink read`` on a Delta table:
TABLE is then the table's path (a directory holding ``_delta_log``); ``--snapshot-id``
names a Delta version."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from typing import Any

from stream_sink.cli.output import format_table
from stream_sink.commit.delta.target import parse_app_id
from stream_sink.delta import AddFile, CommitInfo, DeltaTable, RemoveFile, Txn
from stream_sink.delta.stats import num_records
from stream_sink.ops.source_positions import position_rows
from stream_sink.secrets import masked


def is_delta_path(table: str) -> bool:
    return ("/" in table or table.startswith(".")) and DeltaTable.is_delta_table(table)


def run_delta_table(args: argparse.Namespace) -> int:
    table = DeltaTable.load(args.table)
    cmd = args.table_command
    if cmd == "show":
        return _print_show(_show(table), args.format)
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
        "configuration": masked(s.configuration),
        "files": len(s.files),
        "sinks": sink_rows(table),
        "source_positions": position_rows(table),
    }


def sink_rows(table: DeltaTable) -> list[dict[str, Any]]:
    """Each ``txn`` of the table: the sink and job of a stream_sink appId (None for
    another writer's), its watermark (the txn's version: the highest Spark batch id
    committed) and when it was set."""
    rows = []
    for txn in sorted(table.snapshot.txns.values(), key=lambda t: t.app_id):
        parsed = parse_app_id(txn.app_id)
        rows.append(
            {
                "sink": parsed[1] if parsed else None,
                "job": parsed[0] if parsed else None,
                "watermark": txn.version,
                "committed_at": _time(txn.last_updated) if txn.last_updated else None,
                "app_id": txn.app_id,
            }
        )
    return rows


def _print_show(info: dict[str, Any], fmt: str) -> int:
    """As ``table show`` prints an Iceberg table: one line a field, the sinks a table."""
    if fmt == "jsonl":
        print(json.dumps(info, default=str, ensure_ascii=False))
        return 0
    for key, value in info.items():
        if key == "source_positions":
            print_positions(value)
            continue
        if key != "sinks":
            print(f"{key}: {value}")
            continue
        print("sinks (watermark: the highest Spark batch id each sink committed):")
        if not value:
            print("  (none: no txn in the table)")
            continue
        headers = list(value[0])
        text = format_table(headers, [[r[h] for h in headers] for r in value])
        print("\n".join("  " + line for line in text.splitlines()))
    return 0


def print_positions(rows: list[dict[str, Any]]) -> None:
    """The ``source positions`` part of ``table show`` (none: nothing printed)."""
    if not rows:
        return
    print("source positions (each sink's last recorded end offsets and event-time watermark):")
    headers = list(rows[0])
    text = format_table(headers, [[r[h] for h in headers] for r in rows])
    print("\n".join("  " + line for line in text.splitlines()))


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


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


def _emit(rows: list[dict[str, Any]], fmt: str) -> int:
    if fmt == "jsonl":
        for r in rows:
            print(json.dumps(r, default=str, ensure_ascii=False))
        return 0
    if not rows:
        print("(no rows)")
        return 0
    headers = list(rows[0])
    print(format_table(headers, [[r.get(h) for h in headers] for r in rows]))
    return 0
