"""What ``drop_table(purge=True)`` deletes of a table a catalog does not keep in a
directory of its own (the SQL catalog's): the files the table's metadata reaches,
and directories only under the table's own location.

Invariants (Iceberg Java's ``CatalogUtil.dropTableData``, and no more):
- Deleted: every metadata file of the log, manifest list and manifest the metadata
  reaches, and, unless ``gc.enabled=false`` (files may be shared with other tables),
  every data and delete file they name, wherever they are.
- Directories: ``<location>/data``, ``<location>/metadata`` and the
  ``write.data.path``/``write.metadata.path`` directories that lie under the table's
  location are removed whole (the table's uncommitted files go with them; data
  directories not with ``gc.enabled=false``), then the location when it is empty.
  A directory outside the location (a ``write.data.path`` shared with another table)
  keeps every file the table does not reach.
- Nothing stops the purge half-way: a file that cannot be read or deleted is logged
  and the rest goes on (the table is already unregistered).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from stream_sink.exceptions import StreamSinkError
from stream_sink.io import FileIO
from stream_sink.io.locations import is_under
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.reachable import ReachableFiles, ReadMetadata, reachable_files

log = logging.getLogger(__name__)

GC_ENABLED = "gc.enabled"


def purge_table_files(
    io_for: Callable[[str], FileIO],
    metadata_location: str,
    metadata: TableMetadata,
    read_metadata: ReadMetadata,
) -> None:
    """Delete what a purge deletes (see the module) of the table whose current
    metadata ``metadata`` is at ``metadata_location``."""
    io = io_for(metadata.location)
    try:
        found = reachable_files(io, metadata_location, metadata, read_metadata, strict=False)
    except (OSError, StreamSinkError) as e:  # a damaged manifest: its files stay
        log.warning("purging %s: cannot read all of its metadata (%s)", metadata.location, e)
        found = ReachableFiles(frozenset({metadata_location}), frozenset())
    gc = metadata.properties.get(GC_ENABLED, "true").strip().lower() != "false"
    for path in sorted(found.content if gc else ()) + sorted(found.metadata):
        _quietly(f"could not delete {path}", partial(_delete, io_for, path))
    props = metadata.properties
    data = {f"{metadata.location}/data", props.get("write.data.path", "")} if gc else set()
    directories = data | {f"{metadata.location}/metadata", props.get("write.metadata.path", "")}
    for directory in sorted(d.rstrip("/") for d in directories if d):
        if is_under(directory, metadata.location):
            _quietly(f"could not purge {directory}", partial(_delete_dir, io_for, directory))
    if io.scheme == "file" and not io.list_dir(metadata.location):
        io.delete_dir(metadata.location)


def _delete(io_for: Callable[[str], FileIO], path: str) -> None:
    io_for(path).delete(path)


def _delete_dir(io_for: Callable[[str], FileIO], directory: str) -> None:
    io_for(directory).delete_dir(directory)


def _quietly(what: str, action: Callable[[], None]) -> None:
    try:
        action()
    except (OSError, StreamSinkError) as e:
        log.warning("%s: %s", what, e)
