"""Every file the table's metadata reaches (:mod:`stream_sink.table.reachable`), read
from the table's refreshed metadata; a missing or damaged file of the current
metadata is an error naming the table and the file."""

from __future__ import annotations

from stream_sink.exceptions import CorruptMetadataError, MissingFileError
from stream_sink.table import reachable
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.table import Table


def reachable_files(table: Table) -> set[str]:
    table.refresh()
    try:
        found = reachable.reachable_files(
            table.io, table.metadata_location, table.metadata, lambda loc: _metadata(table, loc)
        )
    except (MissingFileError, CorruptMetadataError) as e:
        raise type(e)(f"table {table.name}: {e}") from e
    return found.all


def _metadata(table: Table, location: str) -> TableMetadata | None:
    try:
        return table.catalog.read_metadata(location, table.identifier)
    except MissingFileError:
        return None
