"""Kafka Connect schemas (the ``schema`` half of JsonConverter's ``schema``/``payload``
messages, as Debezium writes them) as Arrow schemas of the changed rows.

Invariants:
- A row's columns are the fields of the envelope's ``after`` struct (``before`` when an
  event has no ``after`` schema), in their order; a field is nullable when Connect calls
  it ``optional``.
- Values keep their physical Connect type (``int32``, ``int64``, ``string``, ...):
  Debezium's logical types (dates as days, timestamps as micro- or milliseconds, decimals
  as strings with ``decimal.handling.mode=string``) arrive as those numbers and strings.
- :func:`merge_row_schemas` unions the row schemas of many events (a column added to the
  source table mid-stream appears in later events only): columns of the widest schema
  first, then others in the order first seen; one name with two types is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from stream_sink.exceptions import SchemaMismatchError, ValidationError

CONNECT_TYPES: Mapping[str, pa.DataType] = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
"""Kafka Connect's primitive schema types and the Arrow type of their JSON values."""


def row_schema_of(envelope_schema: Mapping[str, Any] | str) -> pa.Schema:
    """The row schema in one Debezium envelope's Connect schema (a dict or its JSON)."""
    schema = json.loads(envelope_schema) if isinstance(envelope_schema, str) else envelope_schema
    images = {f.get("field"): f for f in schema.get("fields") or ()}
    image = images.get("after") or images.get("before")
    if image is None or image.get("type") != "struct":
        raise ValidationError(
            "Debezium event schema has no 'after' or 'before' struct (is the converter "
            f"Kafka Connect's JsonConverter with schemas.enable=true?): {str(schema)[:200]}"
        )
    return pa.schema([_field(f, image.get("name", "row")) for f in image.get("fields") or ()])


def _field(field: Mapping[str, Any], where: str) -> pa.Field:
    kind = field.get("type")
    arrow = CONNECT_TYPES.get(str(kind))
    if arrow is None:
        raise ValidationError(
            f"column {field.get('field')!r} of {where} has Kafka Connect type {kind!r}, "
            f"which the sink does not map (known: {', '.join(CONNECT_TYPES)})"
        )
    return pa.field(str(field["field"]), arrow, nullable=bool(field.get("optional", True)))


def merge_row_schemas(schemas: Iterable[pa.Schema]) -> pa.Schema:
    """One schema holding every column of ``schemas`` (see the module's invariants)."""
    ordered = sorted(schemas, key=len, reverse=True)
    fields: dict[str, pa.Field] = {}
    for schema in ordered:
        for f in schema:
            seen = fields.get(f.name)
            if seen is None:
                fields[f.name] = f
            elif seen.type != f.type:
                raise SchemaMismatchError(
                    f"column {f.name!r} is {seen.type} in some Debezium events and {f.type} "
                    "in others of the same batch; change the column's type in a separate "
                    "deployment of the stream, or map it with row_schema="
                )
            elif f.nullable and not seen.nullable:
                fields[f.name] = seen.with_nullable(True)
    return pa.schema(list(fields.values()))
