"""File paths and partition values as the Delta log stores them.

Invariants:
- Partition values are strings in the protocol's serialization ("Partition Value
  Serialization"): numbers in decimal, booleans ``true``/``false``, dates ``YYYY-MM-DD``,
  timestamps ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC for zoned timestamps), null as None.
- A file's log path is its path relative to the table root, percent-encoded as a URI;
  partition directories are ``col=value`` with Hive escaping.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import quote, unquote, urlparse

import pyarrow as pa

from stream_sink.exceptions import CorruptMetadataError, SchemaMismatchError

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_HIVE_ESCAPE = set("\"#%'*/:=?\\\x7f{[]}^") | {chr(c) for c in range(0x20)}


def serialize_partition_value(value: Any, type_: pa.DataType, column: str) -> str | None:
    if value is None:
        return None
    if pa.types.is_boolean(type_):
        return "true" if value else "false"
    if pa.types.is_timestamp(type_):
        ts: dt.datetime = value
        if ts.tzinfo is not None:
            ts = ts.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return ts.strftime("%Y-%m-%d %H:%M:%S.%f")
    if pa.types.is_date(type_):
        return value.isoformat()  # type: ignore[no-any-return]
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        raise SchemaMismatchError(
            f"partition column {column!r}: binary partitions are not supported"
        )
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_partition_value(raw: str | None, type_: pa.DataType, column: str) -> Any:
    """The Python value of a serialized partition value of ``type_``."""
    if raw is None or (raw == "" and not pa.types.is_string(type_)):
        return None
    try:
        if pa.types.is_string(type_) or pa.types.is_large_string(type_):
            return raw
        if pa.types.is_boolean(type_):
            return raw.lower() == "true"
        if pa.types.is_integer(type_):
            return int(raw)
        if pa.types.is_floating(type_):
            return float(raw)
        if pa.types.is_decimal(type_):
            return Decimal(raw)
        if pa.types.is_date(type_):
            return dt.date.fromisoformat(raw)
        if pa.types.is_timestamp(type_):
            ts = dt.datetime.fromisoformat(raw.replace("T", " ").rstrip("Z"))
            return ts.replace(tzinfo=dt.timezone.utc) if type_.tz is not None else ts
    except ValueError as e:
        raise CorruptMetadataError(
            f"partition column {column!r}: cannot parse {raw!r} as {type_} ({e})"
        ) from None
    raise SchemaMismatchError(f"partition column {column!r}: type {type_} is not supported")


def _hive_escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPE else c for c in value)


def partition_dir(columns: Sequence[str], values: Mapping[str, str | None]) -> str:
    """``a=1/b=x`` for partition values (already serialized)."""
    parts = []
    for c in columns:
        v = values.get(c)
        parts.append(f"{_hive_escape(c)}={NULL_PARTITION if v is None else _hive_escape(v)}")
    return "/".join(parts)


def encode_path(relative: str) -> str:
    """The log form (URI-encoded) of a path relative to the table root."""
    return quote(relative, safe="/")


def absolute_location(table_location: str, log_path: str) -> str:
    """The location of a file named ``log_path`` in the log of the table at
    ``table_location`` (relative paths are URI-decoded; absolute URIs are kept)."""
    parsed = urlparse(log_path)
    if parsed.scheme and len(parsed.scheme) > 1:
        if parsed.scheme == "file":
            return unquote(parsed.path)
        return log_path
    if log_path.startswith("/"):
        return unquote(log_path)
    return f"{table_location.rstrip('/')}/{unquote(log_path)}"
