"""``stream-sink table upgrade TABLE --format-version N``.

Raises an Iceberg table's format version in one metadata-only commit (no data or
manifest is rewritten); prints the version before and after. Exit 0 when done (also
when the table already is at N), 1 on an error (a downgrade, an unknown version).
"""

from __future__ import annotations

import argparse
from typing import Any

from stream_sink.table.metadata import NEWEST_FORMAT_VERSION
from stream_sink.table.table import Table


def add_upgrade_parser(
    tsub: Any, formatter: type[argparse.HelpFormatter] = argparse.HelpFormatter
) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = tsub.add_parser(
        "upgrade",
        formatter_class=formatter,
        help="raise an Iceberg table's format version (metadata only)",
    )
    p.add_argument("table", help="table name such as db.events")
    p.add_argument(
        "--format-version",
        type=int,
        default=NEWEST_FORMAT_VERSION,
        help=f"the format version to upgrade to (default: {NEWEST_FORMAT_VERSION})",
    )
    return p


def run_upgrade(table: Table, args: argparse.Namespace) -> int:
    before = table.format_version
    table.upgrade_format_version(args.format_version)
    after = table.format_version
    if before == after:
        print(f"table {table.name} already is format version {after}: nothing changed")
    else:
        print(f"table {table.name}: format version {before} -> {after} ({table.metadata_location})")
    return 0
