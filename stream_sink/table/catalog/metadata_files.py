"""Metadata JSON files as catalogs store them: encoding, compression, the
metadata log, and removal of files that fell out of the log.

Invariants:
- A file is gzip-compressed exactly when the table property
  ``write.metadata.compression-codec`` is ``gzip``; readers recognise gzip by its
  magic bytes, whatever the file is called (Java writes ``.gz.metadata.json`` and
  older versions ``.metadata.json.gz``).
- Every commit records the replaced file in the metadata log once.
- Files are deleted after a commit only when
  ``write.metadata.delete-after-commit.enabled`` is true, and only those the
  commit dropped from the log; a failure to delete never fails the commit.
"""

from __future__ import annotations

import gzip
import logging
import re
import zlib

from stream_sink.exceptions import CorruptMetadataError, InvalidOptionError
from stream_sink.io import FileIO
from stream_sink.table.metadata import TableMetadata

log = logging.getLogger(__name__)

COMPRESSION_CODEC = "write.metadata.compression-codec"
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
STREAMING_METADATA_PROPERTIES = {DELETE_AFTER_COMMIT: "true", PREVIOUS_VERSIONS_MAX: "50"}
"""What tables a sink creates get (unless the template sets them): each commit deletes
the metadata file that falls out of the log, which keeps the newest 50 (at a commit a
second, the last minute of versions for ``table recover``)."""
_GZIP_MAGIC = b"\x1f\x8b"
_VERSION = re.compile(r"^(?:v(\d+)|(\d+)-[0-9a-fA-F-]{36})(?:\.gz)?\.metadata\.json(?:\.gz)?$")


def metadata_file_version(name: str) -> int | None:
    """The version number in a metadata file's name: Hadoop's ``v<N>.metadata.json``, the
    SQL and REST catalogs' (and Java's) ``<NNNNN>-<uuid>.metadata.json``, gzip variants
    included; None for any other name."""
    m = _VERSION.match(name)
    return int(m.group(1) or m.group(2)) if m else None


def metadata_suffix(metadata: TableMetadata) -> str:
    """File name ending for ``metadata``'s codec (Java's naming)."""
    codec = metadata.properties.get(COMPRESSION_CODEC, "none").strip().lower()
    if codec in ("none", ""):
        return ".metadata.json"
    if codec == "gzip":
        return ".gz.metadata.json"
    raise InvalidOptionError(
        f"table property {COMPRESSION_CODEC}={codec!r} is not supported (none or gzip) "
        f"for table at {metadata.location}"
    )


def encode_metadata(metadata: TableMetadata) -> bytes:
    data = metadata.to_json().encode("utf-8")
    if metadata_suffix(metadata).startswith(".gz"):
        return gzip.compress(data, mtime=0)
    return data


def decode_metadata(data: bytes, location: str) -> bytes:
    """The JSON bytes of a stored metadata file (gunzipped when compressed)."""
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise CorruptMetadataError(
            f"metadata file {location} is truncated or corrupt gzip: {e}"
        ) from e


def with_previous_file(
    new: TableMetadata, previous_location: str, previous_ms: int
) -> TableMetadata:
    """``new`` with ``previous_location`` as the newest metadata-log entry (added once)."""
    if new.metadata_log and new.metadata_log[-1].value == previous_location:
        return new
    return new.with_metadata_log_entry(previous_location, previous_ms)


def delete_removed_metadata(
    io: FileIO, before: TableMetadata, previous_location: str, after: TableMetadata
) -> None:
    """Delete metadata files tracked by ``before`` (plus the file it was read from)
    that ``after`` no longer tracks, when the table asks for it."""
    enabled = after.properties.get(DELETE_AFTER_COMMIT, "false").strip().lower() == "true"
    if not enabled:
        return
    tracked = {str(e.value) for e in after.metadata_log}
    candidates = [str(e.value) for e in before.metadata_log] + [previous_location]
    for location in candidates:
        if location in tracked:
            continue
        try:
            io.delete(location)
        except OSError as e:
            log.warning("could not delete old metadata file %s: %s", location, e)
