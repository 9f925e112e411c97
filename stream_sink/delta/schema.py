"""Delta schema strings (PROTOCOL.md "Schema Serialization Format") to and from Arrow.

Invariants: ``to_arrow(from_arrow(s))`` keeps names, nullability and types for every type
listed here; a timestamp with a time zone is Delta ``timestamp`` (UTC, microseconds), a
timestamp without one is ``timestamp_ntz`` (which needs the ``timestampNtz`` feature).
A schema string that passes :func:`check_schema_string` has the shape every reader of
it here assumes (objects where objects belong, names that are strings, nesting at most
:data:`MAX_NESTING` deep), so none of them meets a raw ``KeyError`` or
``RecursionError`` on a crafted log.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import pyarrow as pa

from stream_sink.exceptions import (
    DECODE_ERRORS,
    CorruptMetadataError,
    SchemaMismatchError,
    UnsupportedTypeError,
)

_PRIMITIVE_TO_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
PHYSICAL_NAME = "delta.columnMapping.physicalName"
ID = "delta.columnMapping.id"
FIELD_ID = "PARQUET:field_id"


MAX_NESTING = 64
"""Structs, arrays and maps nested deeper than this are refused as damage."""
TYPE_CHANGES = "delta.typeChanges"


@lru_cache(maxsize=16)
def check_schema_string(schema_string: str) -> None:
    """Raise CorruptMetadataError unless ``schema_string`` is a struct whose fields, at
    every depth, are objects with a string ``name``, a ``type``, and ``metadata`` (when
    present) an object whose ``delta.typeChanges`` is a list of objects."""
    try:
        doc = json.loads(schema_string)
        if not isinstance(doc, dict):
            raise TypeError("not an object")
        _check_struct(doc, 0)
    except DECODE_ERRORS as e:
        raise CorruptMetadataError(
            f"malformed Delta schema string ({e!r}): {schema_string[:200]}"
        ) from None


def _check_struct(struct: dict[str, Any], depth: int) -> None:
    if not isinstance(struct.get("fields"), list):
        raise TypeError("a struct without a list of fields")
    for f in struct["fields"]:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise TypeError(f"a struct field {f!r:.100} without a string name")
        meta = f.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise TypeError(f"field {f['name']!r}: metadata {meta!r:.100} is not an object")
        changes = (meta or {}).get(TYPE_CHANGES)
        if changes is not None and not (
            isinstance(changes, list) and all(isinstance(c, dict) for c in changes)
        ):
            raise TypeError(f"field {f['name']!r}: {TYPE_CHANGES} is not a list of objects")
        _check_type(f.get("type"), depth)


def _check_type(t: Any, depth: int) -> None:
    if isinstance(t, str):
        return
    if not isinstance(t, dict):
        raise TypeError(f"type {t!r:.100} is neither a name nor an object")
    if depth >= MAX_NESTING:
        raise ValueError(f"types nested more than {MAX_NESTING} deep")
    kind = t.get("type")
    if kind == "struct":
        _check_struct(t, depth + 1)
    elif kind == "array":
        _check_type(t.get("elementType"), depth + 1)
    elif kind == "map":
        _check_type(t.get("keyType"), depth + 1)
        _check_type(t.get("valueType"), depth + 1)


def schema_to_arrow(schema_string: str) -> pa.Schema:
    check_schema_string(schema_string)
    try:
        doc = json.loads(schema_string)
        return pa.schema([_field_to_arrow(f) for f in doc["fields"]])
    except DECODE_ERRORS as e:
        raise CorruptMetadataError(
            f"malformed Delta schema string ({e!r}): {schema_string[:200]}"
        ) from e


def _field_to_arrow(f: dict[str, Any], physical: bool = False) -> pa.Field:
    """The Arrow field of a Delta struct field; ``physical``: named by its column mapping
    physical name and carrying its id as the Parquet field id (where it has them)."""
    name = f["name"]
    meta = f.get("metadata") or {}
    field_meta = None
    if physical:
        name = meta.get(PHYSICAL_NAME, name)
        if ID in meta:
            field_meta = {FIELD_ID: str(meta[ID])}
    try:
        arrow = _type_to_arrow(f["type"], physical)
    except UnsupportedTypeError as e:
        raise e.within(str(f["name"])) from None
    return pa.field(name, arrow, nullable=bool(f.get("nullable", True)), metadata=field_meta)


def _type_to_arrow(t: Any, physical: bool = False) -> pa.DataType:
    if isinstance(t, str):
        if t in _PRIMITIVE_TO_ARROW:
            return _PRIMITIVE_TO_ARROW[t]
        m = _DECIMAL.match(t)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        raise UnsupportedTypeError(t, "Delta")
    kind = t["type"]
    if kind == "struct":
        return pa.struct([_field_to_arrow(f, physical) for f in t["fields"]])
    if kind == "array":
        elem = _type_to_arrow(t["elementType"], physical)
        return pa.list_(pa.field("element", elem, t.get("containsNull", True)))
    if kind == "map":
        key = pa.field("key", _type_to_arrow(t["keyType"], physical), False)
        value = pa.field(
            "value", _type_to_arrow(t["valueType"], physical), t.get("valueContainsNull", True)
        )
        return pa.map_(key, value)
    raise UnsupportedTypeError(str(kind), "Delta")


def schema_fields(schema_string: str) -> list[dict[str, Any]]:
    """The top-level struct fields of a schema string, as JSON (with their metadata)."""
    check_schema_string(schema_string)
    try:
        return list(json.loads(schema_string)["fields"])
    except DECODE_ERRORS as e:
        raise CorruptMetadataError(
            f"malformed Delta schema string ({e!r}): {schema_string[:200]}"
        ) from e


def physical_schema(schema_string: str) -> pa.Schema:
    """The Arrow schema data files are written in under column mapping."""
    try:
        return pa.schema([_field_to_arrow(f, True) for f in schema_fields(schema_string)])
    except DECODE_ERRORS as e:
        raise CorruptMetadataError(f"malformed Delta schema string ({e!r})") from e


def schema_from_arrow(schema: pa.Schema) -> str:
    """The Delta schema string of ``schema``."""
    doc = {"type": "struct", "fields": [_field_from_arrow(f) for f in schema]}
    return json.dumps(doc, separators=(",", ":"))


def _field_from_arrow(f: pa.Field) -> dict[str, Any]:
    return {
        "name": f.name,
        "type": _type_from_arrow(f.type, f.name),
        "nullable": f.nullable,
        "metadata": {},
    }


def _type_from_arrow(t: pa.DataType, where: str) -> Any:
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    for name, arrow in _PRIMITIVE_TO_ARROW.items():
        if t == arrow and not pa.types.is_timestamp(t):
            return name
    if pa.types.is_struct(t):
        return {
            "type": "struct",
            "fields": [_field_from_arrow(t.field(i)) for i in range(t.num_fields)],
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {
            "type": "array",
            "elementType": _type_from_arrow(t.value_type, where),
            "containsNull": t.value_field.nullable,
        }
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": _type_from_arrow(t.key_type, where),
            "valueType": _type_from_arrow(t.item_type, where),
            "valueContainsNull": t.item_field.nullable,
        }
    raise SchemaMismatchError(f"column {where!r}: Arrow type {t} has no Delta equivalent")


def uses_timestamp_ntz(schema: pa.Schema) -> bool:
    def walk(t: pa.DataType) -> bool:
        if pa.types.is_timestamp(t):
            return t.tz is None
        if pa.types.is_struct(t):
            return any(walk(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return walk(t.value_type)
        if pa.types.is_map(t):
            return walk(t.key_type) or walk(t.item_type)
        return False

    return any(walk(f.type) for f in schema)


def normalize_timestamps(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every top-level timestamp in microseconds and tz-aware ones in UTC
    (what Delta stores)."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_timestamp(t):
            t = pa.timestamp("us", tz="UTC" if t.tz is not None else None)
        elif pa.types.is_large_string(t) or pa.types.is_string_view(t):
            t = pa.string()
        fields.append(pa.field(f.name, t, f.nullable))
    return pa.schema(fields)
