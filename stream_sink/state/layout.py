"""What a state directory holds, and where the state of a sink lives.

A state directory is one of: absent, empty, a RocksDB database (has ``CURRENT``), or
an in-memory backend's log (has ``state.log``). Anything else is foreign and is
refused rather than written into.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from stream_sink.exceptions import CorruptStateError, InvalidOptionError

DirKind = Literal["absent", "empty", "rocksdb", "memory"]

ROCKSDB_MARKER_FILE = "CURRENT"
MEMORY_LOG_FILE = "state.log"
_SINK_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]*$")


def inspect_state_dir(path: str) -> DirKind:
    """Classify ``path``; a file, or a non-empty directory of neither kind, is corrupt."""
    if not os.path.exists(path):
        return "absent"
    if not os.path.isdir(path):
        raise CorruptStateError(f"state directory {path} is a file, not a directory")
    entries = sorted(os.listdir(path))
    if not entries:
        return "empty"
    if ROCKSDB_MARKER_FILE in entries:
        return "rocksdb"
    if MEMORY_LOG_FILE in entries:
        return "memory"
    shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
    raise CorruptStateError(
        f"state directory {path} is not a stream_sink state directory "
        f"(no {ROCKSDB_MARKER_FILE} or {MEMORY_LOG_FILE}; it holds: {shown})"
    )


def validate_sink_id(sink_id: str) -> str:
    """A sink id is one path component: letters, digits, ``_ . = -``; no leading dot."""
    if not isinstance(sink_id, str) or not _SINK_ID.match(sink_id):
        raise InvalidOptionError(
            f"sink id {sink_id!r} must be a non-empty name of letters, digits, '_', '.', '=' "
            "or '-' that does not start with '.', '=' or '-'"
        )
    return sink_id


def state_dir_for(base_dir: str, sink_id: str) -> str:
    """``<base_dir>/<sink-id>``: where a sink's operator state lives (e.g. ``state/db.t``)."""
    return os.path.join(base_dir, validate_sink_id(sink_id))


def fsync_tree(path: str) -> None:
    """fsync every file and directory under ``path`` (and ``path`` itself)."""
    for root, _dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(root)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
