"""``stream-sink table list|show|snapshots|files|recover`` and ``stream-sink read``.

Every command opens the catalog named by ``--warehouse`` (Hadoop, the default
``warehouse``), ``--catalog-uri`` (SQL, or REST with ``--catalog-type rest`` and
``--catalog-property KEY=VALUE``), or, when TABLE is a path holding a Delta table,
that table (:mod:`.delta_commands`), or an Iceberg table's directory, that table
(:mod:`.table_paths`, read-only commands); it prints a table people can read, or
with ``--format jsonl`` one JSON object per line for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.cli.consistent_command import add_consistent_parser, consistent_rows
from stream_sink.cli.delta_commands import (
    is_delta_path,
    print_positions,
    run_delta_read,
    run_delta_table,
)
from stream_sink.cli.output import format_table, progress
from stream_sink.cli.recover_command import add_recover_parser, run_recover
from stream_sink.cli.table_paths import iceberg_table_at, refuse_table_as_warehouse
from stream_sink.cli.upgrade_command import add_upgrade_parser, run_upgrade
from stream_sink.commit.iceberg.watermark import JOB_ID, OPERATOR_ID, summary_stamp
from stream_sink.commit.iceberg.watermark import sink_watermarks as read_sink_watermarks
from stream_sink.exceptions import InvalidOptionError, NotFoundError
from stream_sink.io import FileIO
from stream_sink.maintenance.metadata_files import metadata_files_warning
from stream_sink.ops.source_positions import position_rows
from stream_sink.secrets import masked
from stream_sink.table.catalog import Catalog
from stream_sink.table.catalog.sql import engine_url
from stream_sink.table.manifest import DataFileContent, read_manifest, snapshot_manifests
from stream_sink.table.table import Table

TABLE_HELP = (
    "table name such as db.events, the directory of a table (Iceberg or Delta), or an "
    "Iceberg metadata file (*.metadata.json, read-only)"
)


def add_catalog_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--warehouse",
        default=None,
        help="Hadoop catalog warehouse directory or URI; with --catalog-uri, the "
        "SQL catalog's warehouse (default: warehouse)",
    )
    p.add_argument(
        "--catalog-uri",
        default=None,
        help="SQL catalog database URI (sqlite:///catalog.db, postgresql://...) or, with "
        "--catalog-type rest, the REST catalog's base URL "
        "(default: none, a Hadoop catalog under --warehouse)",
    )
    p.add_argument(
        "--catalog-type",
        choices=("hadoop", "sql", "rest"),
        default=None,
        help="the catalog kind (default: sql with --catalog-uri, else hadoop)",
    )
    p.add_argument(
        "--catalog-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a catalog property, repeatable (s3.endpoint=..., rest.sigv4-enabled=true, "
        "header.X-Name=...); give secrets with --catalog-properties-file or "
        "--catalog-property-env instead, which other users cannot read in the process list",
    )
    p.add_argument(
        "--catalog-properties-file",
        default=None,
        metavar="FILE",
        help="catalog properties, one KEY=VALUE a line (# starts a comment), read before "
        "--catalog-property-env and --catalog-property (default: none)",
    )
    p.add_argument(
        "--catalog-property-env",
        action="append",
        default=[],
        metavar="KEY=VAR",
        help="a catalog property whose value is environment variable VAR's, repeatable "
        "(credential=CATALOG_CREDENTIAL, header.Authorization=CATALOG_AUTH)",
    )
    p.add_argument(
        "--catalog-name",
        default="local",
        help="catalog name (the SQL catalog's catalog_name column)",
    )


def add_table_parsers(sub: Any, formatter: type[argparse.HelpFormatter]) -> None:
    table = sub.add_parser("table", help="inspect tables", formatter_class=formatter)
    tsub = table.add_subparsers(dest="table_command", required=True, metavar="COMMAND")
    lst = tsub.add_parser(
        "list", help="tables of a namespace (all namespaces by default)", formatter_class=formatter
    )
    lst.add_argument("namespace", nargs="?", help="namespace such as db (default: all)")
    for name, text in (
        ("show", "schema, partitioning, properties, current snapshot, sink watermarks"),
        ("snapshots", "snapshots with their operation, totals, live rows and sink watermark"),
        ("files", "live data and delete files of a snapshot"),
    ):
        p = tsub.add_parser(name, help=text, formatter_class=formatter)
        p.add_argument(
            "table",
            help=TABLE_HELP,
        )
        if name == "files":
            p.add_argument(
                "--snapshot-id",
                type=int,
                default=None,
                help="snapshot to list (default: the current one)",
            )
    add_consistent_parser(tsub, formatter)
    for p in tsub.choices.values():
        add_catalog_options(p)
        p.add_argument(
            "--format",
            choices=("table", "jsonl"),
            default="table",
            help="a table for people, or one JSON object per line",
        )
    add_catalog_options(add_recover_parser(tsub, formatter))
    add_catalog_options(add_upgrade_parser(tsub, formatter))

    read = sub.add_parser(
        "read", help="print a table's rows (deletes applied)", formatter_class=formatter
    )
    read.add_argument(
        "table",
        help=TABLE_HELP,
    )
    read.add_argument(
        "--snapshot-id",
        type=int,
        default=None,
        help="read this snapshot (default: the current one)",
    )
    read.add_argument("--ref", default=None, help="read this branch or tag (default: main)")
    read.add_argument(
        "--filter",
        default=None,
        help="row filter, e.g. \"id = 5 and ts >= '2024-01-01'\" (default: every row)",
    )
    read.add_argument("--columns", default=None, help="comma-separated columns (default: all)")
    read.add_argument("--limit", type=int, default=20, help="rows to print (0: all)")
    read.add_argument(
        "--format",
        choices=("table", "jsonl", "parquet"),
        default="table",
        help="a table for people, JSON lines, or a Parquet file",
    )
    read.add_argument("--output", default=None, help="file for --format parquet (default: stdout)")
    add_catalog_options(read)


def open_catalog(args: argparse.Namespace) -> Catalog:
    """The catalog the options name; it must exist (reading never creates one)."""
    kind = getattr(args, "catalog_type", None) or ("sql" if args.catalog_uri else "hadoop")
    props: dict[str, Any] = dict(catalog_properties_of(args))
    if kind == "rest":
        if not args.catalog_uri:
            raise InvalidOptionError("--catalog-type rest needs --catalog-uri (the server's URL)")
        return load_catalog(
            args.catalog_name, type="rest", uri=args.catalog_uri, warehouse=args.warehouse, **props
        )
    require_catalog_location(args.catalog_uri, args.warehouse or "warehouse")
    if kind == "sql":
        if not args.catalog_uri:
            raise InvalidOptionError("--catalog-type sql needs --catalog-uri (a database URI)")
        return load_catalog(
            args.catalog_name, type="sql", uri=args.catalog_uri, warehouse=args.warehouse, **props
        )
    return load_catalog(
        args.catalog_name, type="hadoop", warehouse=args.warehouse or "warehouse", **props
    )


def catalog_properties_of(args: argparse.Namespace) -> dict[str, str]:
    """The catalog properties the options give: ``--catalog-properties-file``, then
    ``--catalog-property-env``, then ``--catalog-property`` (a later one wins)."""
    out: dict[str, str] = {}
    path = getattr(args, "catalog_properties_file", None)
    if path:
        out.update(properties_file(path))
    out.update(environment_properties(getattr(args, "catalog_property_env", None) or []))
    out.update(catalog_properties(getattr(args, "catalog_property", None) or []))
    return out


def properties_file(path: str) -> dict[str, str]:
    """``KEY=VALUE`` lines of ``path`` (blank lines and ``#`` comments skipped; the key
    stripped, the value as written)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InvalidOptionError(
            f"--catalog-properties-file {path}: cannot be read ({e.strerror or e})"
        ) from None
    out: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, value = _key_value(line, f"--catalog-properties-file {path}, line {number}")
        out[key] = value
    return out


def environment_properties(pairs: list[str]) -> dict[str, str]:
    """``["key=VAR", ...]`` from ``--catalog-property-env``: each key with the value of
    environment variable VAR, which must be set."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, var = pair.partition("=")
        if not sep or not key.strip() or not var.strip():
            raise InvalidOptionError(f"--catalog-property-env {pair!r}: expected KEY=VAR")
        value = os.environ.get(var.strip())
        if value is None:
            raise InvalidOptionError(
                f"--catalog-property-env {key.strip()}={var.strip()}: environment variable "
                f"{var.strip()} is not set"
            )
        out[key.strip()] = value
    return out


def catalog_properties(pairs: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` from ``--catalog-property``."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, value = _key_value(pair, f"--catalog-property {pair.split('=', 1)[0]!r}")
        out[key] = value
    return out


def _key_value(text: str, where: str) -> tuple[str, str]:
    """``KEY=VALUE`` split at the first ``=`` (the key stripped); the error names
    ``where``, never the text (it may be a secret)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise InvalidOptionError(f"{where}: expected KEY=VALUE")
    return key.strip(), value


def require_catalog_location(catalog_uri: str | None, warehouse: str) -> None:
    """NotFoundError naming the location when a SQLite catalog file or a Hadoop
    warehouse does not exist (a mistyped option), instead of creating an empty one."""
    if catalog_uri:
        url = engine_url(catalog_uri)
        database = url.database or ""
        if (
            url.get_backend_name() == "sqlite"
            and database not in ("", ":memory:")
            and not database.startswith("file:")
            and not os.path.exists(database)
        ):
            raise NotFoundError(
                f"SQL catalog database {database!r} (from --catalog-uri "
                f"{catalog_uri}) does not exist; check the path"
            )
        return
    if not FileIO.for_location(warehouse).exists(warehouse):
        raise NotFoundError(
            f"warehouse {warehouse!r} does not exist; check --warehouse "
            "(the Hadoop catalog's root directory or URI)"
        )


def run_table(args: argparse.Namespace) -> int:
    if args.table_command == "consistent":
        return _emit(consistent_rows(open_catalog(args), args), args.format)
    if args.table_command != "list" and is_delta_path(args.table):
        return run_delta_table(args)
    cmd = args.table_command
    by_path = None if cmd in ("list", "recover", "upgrade") else iceberg_table_at(args.table)
    if by_path is not None:
        return _table_command(by_path, args)
    if cmd == "list":
        refuse_table_as_warehouse(args.warehouse or "warehouse")
    catalog = open_catalog(args)
    if cmd == "list":
        namespaces = [args.namespace] if args.namespace else catalog.list_namespaces()
        rows = [{"table": ".".join(t)} for ns in namespaces for t in catalog.list_tables(ns)]
        return _emit(rows, args.format)
    if cmd == "recover":
        return run_recover(catalog, args)
    if cmd == "upgrade":
        return run_upgrade(catalog.load_table(args.table), args)
    return _table_command(catalog.load_table(args.table), args)


def _table_command(table: Table, args: argparse.Namespace) -> int:
    cmd = args.table_command
    if cmd == "show":
        return _show(table, args.format)
    if cmd == "snapshots":
        return _emit(snapshot_rows(table), args.format)
    return _emit(file_rows(table, args.snapshot_id), args.format)


def snapshot_rows(table: Table) -> list[dict[str, Any]]:
    """One row per snapshot, oldest first. ``live_rows`` is what a read of that snapshot
    returns (deletes applied); ``watermark`` the highest Spark batch id the sink had
    committed with it (``stream-sink.max-committed-checkpoint-id``)."""
    rows = []
    snapshots = table.snapshots()
    for s in progress(snapshots, len(snapshots), "counting live rows"):
        summary = s.summary
        rows.append(
            {
                "snapshot_id": s.snapshot_id,
                "parent_id": s.parent_snapshot_id,
                "seq": s.sequence_number,
                "committed_at": _time(s.timestamp_ms),
                "operation": s.operation,
                "added_records": _int(summary.get("added-records")),
                "live_rows": _live_rows(table, s.snapshot_id),
                "data_files": _int(summary.get("total-data-files")),
                "delete_files": _int(summary.get("total-delete-files")),
                "sink": summary.get(OPERATOR_ID),
                "job": (summary.get(JOB_ID) or "")[:8] or None,
                "watermark": summary_stamp(summary),
            }
        )
    return rows


def sink_watermarks(table: Table) -> list[dict[str, Any]]:
    """Each sink that committed to the main branch: its newest job and its watermark
    (the snapshot summaries' and the durable ``stream-sink.watermark.<sink>`` record's,
    which outlives expired snapshots), as
    :func:`stream_sink.commit.iceberg.watermark.sink_watermarks` reads them."""
    return [
        {
            "sink": w.sink,
            "job": w.job,
            "watermark": w.watermark,
            "snapshot_id": w.snapshot_id,
            "committed_at": None if w.timestamp_ms is None else _time(w.timestamp_ms),
        }
        for w in read_sink_watermarks(table.metadata)
    ]


def _live_rows(table: Table, snapshot_id: int) -> int:
    return int(table.scan(snapshot_id=snapshot_id).count())  # type: ignore[attr-defined]


def file_rows(table: Table, snapshot_id: int | None) -> list[dict[str, Any]]:
    snap = table.snapshot(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    if snap is None:
        return []
    rows = []
    manifests = snapshot_manifests(table.io, snap)
    for m in progress(manifests, len(manifests), "reading manifests"):
        spec = table.metadata.spec_by_id(m.partition_spec_id)
        for e in read_manifest(table.io, m, spec.partition_type(table.schema())):
            if not e.is_live:
                continue
            f = e.data_file
            rows.append(
                {
                    "content": DataFileContent(f.content).name.lower(),
                    "path": f.file_path,
                    "partition": spec.partition_path(f.partition, table.schema()) or "-",
                    "records": f.record_count,
                    "bytes": f.file_size_in_bytes,
                    "seq": e.sequence_number,
                }
            )
    return rows


def _show(table: Table, fmt: str) -> int:
    meta = table.metadata
    current = table.current_snapshot()
    sinks = sink_watermarks(table)
    info: dict[str, Any] = {
        "table": table.name,
        "location": table.location,
        "metadata": table.metadata_location,
        "format_version": meta.format_version,
        "schema": str(meta.schema),
        "identifier_fields": meta.schema.identifier_field_names,
        "partition_spec": [
            f"{f.transform}({meta.schema.find_column_name(f.source_id)}) as {f.name}"
            for f in meta.spec.fields
        ],
        "sort_order": [str(f) for f in meta.sort_order.fields],
        "properties": masked(meta.properties),
        "current_snapshot_id": current.snapshot_id if current else None,
        "snapshots": len(meta.snapshots),
        "refs": {k: r.snapshot_id for k, r in meta.refs.items()},
        "sinks": sinks,
        "source_positions": position_rows(table),
    }
    warning = metadata_files_warning(table)
    if warning:
        info["warning"] = warning
    if fmt == "jsonl":
        print(json.dumps(info, default=str))
        return 0
    for key, value in info.items():
        if key == "schema":
            print(f"{key}:\n{value}")
        elif key == "source_positions":
            print_positions(value)
        elif key == "sinks":
            print("sinks (watermark: the highest Spark batch id each sink committed):")
            if not sinks:
                print("  (none: no snapshot written by a sink)")
            else:
                headers = list(sinks[0])
                table_text = format_table(headers, [[r[h] for h in headers] for r in sinks])
                print("\n".join("  " + line for line in table_text.splitlines()))
        else:
            print(f"{key}: {value}")
    return 0


def run_read(args: argparse.Namespace) -> int:
    if is_delta_path(args.table):
        return run_delta_read(args)
    table = iceberg_table_at(args.table) or open_catalog(args).load_table(args.table)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    scan = table.scan(  # type: ignore[attr-defined]
        snapshot_id=args.snapshot_id, ref=args.ref, row_filter=args.filter, columns=columns
    )
    data: pa.Table = scan.to_arrow()
    if args.limit and args.format != "parquet":
        data = data.slice(0, args.limit)
    if args.format == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(data, args.output or sys.stdout.buffer)
        return 0
    rows = data.to_pylist()
    return _emit(rows, args.format, total=scan.count() if args.format == "table" else None)


def _emit(rows: list[dict[str, Any]], fmt: str, total: int | None = None) -> int:
    if fmt == "jsonl":
        for r in rows:
            print(json.dumps(r, default=str, ensure_ascii=False))
        return 0
    if not rows:
        print("(no rows)")
        return 0
    headers = list(rows[0])
    print(format_table(headers, [[r.get(h) for h in headers] for r in rows]))
    if total is not None and total > len(rows):
        print(f"({len(rows):,} of {total:,} rows shown; --limit 0 shows all)")
    return 0


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _int(value: str | None) -> int | None:
    return int(value) if value is not None else None
