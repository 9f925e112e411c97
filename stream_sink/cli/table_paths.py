"""Iceberg tables given by a path, as the Delta commands take a Delta table's path.

A table of a Hadoop catalog lives at ``<warehouse>/<namespace>/<table>`` with its
metadata versions in ``metadata/v<N>.metadata.json``; any ancestor directory can serve
as a warehouse, so ``<dir>`` is read as table ``<parent name>.<dir name>`` of the Hadoop
catalog two levels up. Any other table directory (metadata files named
``<NNNNN>-<uuid>.metadata.json``, as SQL and REST catalogs write them, no version hint)
and any metadata file is opened from that file (``load_static_table``). Read-only:
nothing is created or changed.
"""

from __future__ import annotations

import os

from stream_sink.catalogs import load_catalog, load_static_table
from stream_sink.exceptions import InvalidOptionError, NotFoundError
from stream_sink.io import FileIO
from stream_sink.table.catalog.static import is_metadata_file
from stream_sink.tables import IcebergTable

METADATA_DIR = "metadata"


def looks_like_path(text: str) -> bool:
    """A table argument naming a directory or a metadata file rather than
    ``namespace.table``."""
    return "/" in text or text.startswith((".", "~")) or is_metadata_file(text)


def is_table_dir(location: str) -> bool:
    """``location`` holds an Iceberg table's ``metadata/`` directory with metadata files."""
    io = FileIO.for_location(location)
    metadata = f"{location.rstrip('/')}/{METADATA_DIR}"
    if not io.exists(metadata):
        return False
    try:
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in io.list_dir(metadata)]
    except (OSError, NotADirectoryError):
        return False
    return any(n.endswith(".metadata.json") or n == "version-hint.text" for n in names)


def iceberg_table_at(text: str) -> IcebergTable | None:
    """The table whose directory or metadata file ``text`` names; None when ``text`` is a
    table name. NotFoundError when ``text`` is a path holding no Iceberg table (callers
    check for a Delta table first)."""
    if not looks_like_path(text):
        return None
    location = os.path.abspath(os.path.expanduser(text)).rstrip("/")
    if is_metadata_file(location):
        return load_static_table(location)
    if not is_table_dir(location):
        raise NotFoundError(
            f"no table at {text}: it holds neither {METADATA_DIR}/ (an Iceberg table) nor "
            "_delta_log/ (a Delta table); a table of a catalog is named namespace.table, "
            "e.g. db.events with --warehouse or --catalog-uri"
        )
    parent = os.path.dirname(location)
    warehouse = os.path.dirname(parent)
    name = f"{os.path.basename(parent)}.{os.path.basename(location)}"
    catalog = load_catalog("path", type="hadoop", warehouse=warehouse)
    if not catalog.table_exists(name):  # not a Hadoop table: its newest metadata file
        return load_static_table(location)
    table = catalog.load_table(name)
    assert isinstance(table, IcebergTable)
    return table


def refuse_table_as_warehouse(warehouse: str) -> None:
    """InvalidOptionError when ``--warehouse`` names a table's directory, not a warehouse
    (it would list nothing, as if the warehouse were empty)."""
    location = os.path.abspath(os.path.expanduser(warehouse))
    if FileIO.for_location(location).scheme == "file" and is_table_dir(location):
        raise InvalidOptionError(
            f"--warehouse {warehouse} is a table's directory (it holds {METADATA_DIR}/), not "
            f"a warehouse: `stream-sink table show {warehouse}` shows the table; the "
            f"warehouse holding it is {os.path.dirname(os.path.dirname(location))}"
        )
