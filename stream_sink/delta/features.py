"""Which Delta protocols this package reads and writes; refusing the others by name.

Reader: version 1, or 3 with reader features within :data:`READER_FEATURES`.
Writer: versions 1-2 (appendOnly, invariants), or 7 with writer features within
:data:`WRITER_FEATURES`. Versions 3-6 imply features this package does not implement
(check constraints, change data feed, generated columns, column mapping, identity).
"""

from __future__ import annotations

from collections.abc import Mapping

from stream_sink.exceptions import UnsupportedError, ValidationError

from .actions import Protocol

READER_FEATURES = frozenset({"timestampNtz"})
WRITER_FEATURES = frozenset({"appendOnly", "invariants", "timestampNtz"})
_LEGACY_WRITER = {
    3: "checkConstraints",
    4: "changeDataFeed, generatedColumns",
    5: "columnMapping",
    6: "identityColumns",
}
APPEND_ONLY = "delta.appendOnly"


def protocol_for(uses_timestamp_ntz: bool) -> Protocol:
    """The lowest protocol a new table needs."""
    if uses_timestamp_ntz:
        return Protocol(3, 7, ("timestampNtz",), ("timestampNtz",))
    return Protocol(1, 2)


def check_readable(protocol: Protocol, where: str) -> None:
    """Raise UnsupportedError naming what this reader lacks."""
    v = protocol.min_reader_version
    if v == 1:
        return
    if v == 2:
        raise UnsupportedError(f"{where}: reader version 2 (columnMapping) is not supported")
    if v == 3:
        missing = sorted(set(protocol.reader_features or ()) - READER_FEATURES)
        if missing:
            raise UnsupportedError(
                f"{where}: the table needs reader features {missing} that stream_sink does "
                f"not support (supported: {sorted(READER_FEATURES)})"
            )
        return
    raise UnsupportedError(f"{where}: reader version {v} is newer than stream_sink supports (3)")


def check_writable(protocol: Protocol, where: str) -> None:
    """Raise UnsupportedError naming the writer features this writer lacks."""
    check_readable(protocol, where)
    v = protocol.min_writer_version
    if v <= 2:
        return
    if v in _LEGACY_WRITER:
        raise UnsupportedError(
            f"{where}: writer version {v} needs {_LEGACY_WRITER[v]}, which stream_sink does "
            "not write; use a table with writer version 2 or 7 without those features"
        )
    if v == 7:
        missing = sorted(set(protocol.writer_features or ()) - WRITER_FEATURES)
        if missing:
            raise UnsupportedError(
                f"{where}: the table needs writer features {missing} that stream_sink does "
                f"not support (supported: {sorted(WRITER_FEATURES)})"
            )
        return
    raise UnsupportedError(f"{where}: writer version {v} is newer than stream_sink supports (7)")


def check_removes_allowed(configuration: Mapping[str, str], where: str) -> None:
    if configuration.get(APPEND_ONLY, "false").lower() == "true":
        raise ValidationError(
            f"{where}: {APPEND_ONLY}=true forbids removing files; use append mode or unset it"
        )
