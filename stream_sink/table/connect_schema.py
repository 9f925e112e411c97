"""Kafka Connect schemas (the ``schema`` half of JsonConverter's ``schema``/``payload``
messages, as Debezium writes them) as Arrow schemas of the changed rows, typed as the
source table has them.

Invariants:
- A row's columns are the fields of the envelope's ``after`` struct (``before`` when an
  event has no ``after`` schema), in their order; a field is nullable when Connect calls
  it ``optional``. A Kafka key's columns are the fields of its struct schema.
- A field with a logical type Connect or Debezium names (``schema.name``) gets the
  source's type (:data:`LOGICAL_TYPES`): ``org.apache.kafka.connect.data.Decimal`` a
  decimal of its ``scale`` and ``connect.decimal.precision``, Debezium's dates a date,
  its timestamps a timestamp (with a time zone only for ``ZonedTimestamp``), ... The
  field's Arrow metadata :data:`WIRE_KEY` then says how its JSON value encodes that type
  (:data:`WIRE_ENCODINGS`), so a reader converts it exactly; a field without the key
  holds its JSON value as it is.
- Physical types map to themselves (``int8`` … ``int64``, ``float``/``float32``,
  ``double``/``float64``, ``boolean``, ``string``, ``bytes``), ``struct``, ``array`` and
  ``map`` recursively; anything else is refused naming the column and its type.
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

WIRE_KEY = b"stream_sink.wire"
"""Arrow field metadata: how a JSON value encodes the field's type (absent: as is)."""

CONNECT_TYPES: Mapping[str, pa.DataType] = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float": pa.float32(),
    "float32": pa.float32(),
    "double": pa.float64(),
    "float64": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
"""Kafka Connect's primitive schema types (as JsonConverter spells them, and as the Connect
API does) and the Arrow type of their JSON values."""

VARIABLE_SCALE_DECIMAL = pa.decimal128(38, 18)
"""An unconstrained ``numeric`` (Debezium's ``VariableScaleDecimal``): Spark's default
decimal, 20 integer and 18 fractional digits; a value with more is refused, not rounded."""

WIRE_ENCODINGS: Mapping[str, str] = {
    "days": "an int: days since 1970-01-01",
    "millis": "a long: milliseconds since 1970-01-01T00:00 (no time zone)",
    "micros": "a long: microseconds since 1970-01-01T00:00 (no time zone)",
    "nanos": "a long: nanoseconds since 1970-01-01T00:00 (no time zone)",
    "iso-instant": "a string: an ISO-8601 timestamp with its offset",
    "time-millis": "an int: milliseconds since midnight, written as microseconds",
    "time-micros": "a long: microseconds since midnight",
    "time-nanos": "a long: nanoseconds since midnight, written as microseconds",
    "unscaled": "base64 bytes: the big-endian two's complement unscaled value",
    "variable-scale": "a struct of scale (int) and value (unscaled bytes)",
}
"""Every encoding :data:`WIRE_KEY` may name, and what the JSON value then is."""

_TIME_OF_DAY = pa.int64()
"""Times of day arrive as microseconds since midnight: Spark 3.5 and Delta have no time
type, so the column is a long in every target."""

LOGICAL_TYPES: Mapping[str, tuple[pa.DataType, str | None]] = {
    "org.apache.kafka.connect.data.Date": (pa.date32(), "days"),
    "io.debezium.time.Date": (pa.date32(), "days"),
    "org.apache.kafka.connect.data.Timestamp": (pa.timestamp("us"), "millis"),
    "io.debezium.time.Timestamp": (pa.timestamp("us"), "millis"),
    "io.debezium.time.MicroTimestamp": (pa.timestamp("us"), "micros"),
    "io.debezium.time.NanoTimestamp": (pa.timestamp("us"), "nanos"),
    "io.debezium.time.ZonedTimestamp": (pa.timestamp("us", "UTC"), "iso-instant"),
    "org.apache.kafka.connect.data.Time": (_TIME_OF_DAY, "time-millis"),
    "io.debezium.time.Time": (_TIME_OF_DAY, "time-millis"),
    "io.debezium.time.MicroTime": (_TIME_OF_DAY, "time-micros"),
    "io.debezium.time.NanoTime": (_TIME_OF_DAY, "time-nanos"),
    "io.debezium.data.VariableScaleDecimal": (VARIABLE_SCALE_DECIMAL, "variable-scale"),
    "io.debezium.data.Json": (pa.string(), None),
    "io.debezium.data.Uuid": (pa.string(), None),
    "io.debezium.data.Xml": (pa.string(), None),
    "io.debezium.data.Enum": (pa.string(), None),
    "io.debezium.data.EnumSet": (pa.string(), None),
    "io.debezium.time.ZonedTime": (pa.string(), None),
    "io.debezium.time.Interval": (pa.string(), None),
    "io.debezium.time.MicroDuration": (pa.int64(), None),
    "io.debezium.time.Year": (pa.int32(), None),
    "io.debezium.data.Bits": (pa.binary(), None),
}
"""Connect's and Debezium's logical type names (``schema.name``) with a fixed type: the
Arrow type of the column and the encoding of its JSON value (None: as is). Connect's
``Decimal`` takes its type from the field's parameters (:func:`_decimal`)."""

DECIMAL = "org.apache.kafka.connect.data.Decimal"
MAX_DECIMAL_PRECISION = 38


def row_schema_of(envelope_schema: Mapping[str, Any] | str) -> pa.Schema:
    """The row schema in one Debezium envelope's Connect schema (a dict or its JSON)."""
    schema = _loaded(envelope_schema)
    images = {f.get("field"): f for f in schema.get("fields") or ()}
    image = images.get("after") or images.get("before")
    if image is None or image.get("type") != "struct":
        raise ValidationError(
            "Debezium event schema has no 'after' or 'before' struct (is the converter "
            f"Kafka Connect's JsonConverter with schemas.enable=true?): {str(schema)[:200]}"
        )
    return _struct_schema(image, image.get("name", "row"))


def key_schema_of(key_schema: Mapping[str, Any] | str) -> pa.Schema:
    """The key columns in a Kafka key's Connect schema (JsonConverter with
    ``key.converter.schemas.enable=true``): a tombstone's only row image."""
    schema = _loaded(key_schema)
    if schema.get("type") != "struct":
        raise ValidationError(
            "a Kafka key's schema is not a struct of key columns (is the key converter "
            f"Kafka Connect's JsonConverter with schemas.enable=true?): {str(schema)[:200]}"
        )
    return _struct_schema(schema, schema.get("name", "key"))


def _loaded(schema: Mapping[str, Any] | str) -> Mapping[str, Any]:
    return json.loads(schema) if isinstance(schema, str) else schema


def _struct_schema(struct: Mapping[str, Any], where: str) -> pa.Schema:
    return pa.schema([_field(f, where) for f in struct.get("fields") or ()])


def _field(field: Mapping[str, Any], where: str) -> pa.Field:
    name = str(field.get("field"))
    arrow, wire = _type(field, name, where)
    meta = {WIRE_KEY: wire.encode()} if wire else None
    return pa.field(name, arrow, nullable=bool(field.get("optional", True)), metadata=meta)


def _type(schema: Mapping[str, Any], name: str, where: str) -> tuple[pa.DataType, str | None]:
    """The Arrow type of a Connect schema and the wire encoding of its JSON value."""
    logical = str(schema.get("name") or "")
    if logical == DECIMAL:
        return _decimal(schema, name, where), "unscaled"
    if logical in LOGICAL_TYPES:
        return LOGICAL_TYPES[logical]
    kind = str(schema.get("type"))
    if kind in CONNECT_TYPES:
        return CONNECT_TYPES[kind], None
    if kind == "struct":
        return pa.struct(list(_struct_schema(schema, f"{where}.{name}"))), None
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        item, _ = _type(schema["items"], f"{name}[]", where)
        return pa.list_(item), None
    if kind == "map" and isinstance(schema.get("keys"), Mapping):
        key, _ = _type(schema["keys"], f"{name} key", where)
        value, _ = _type(schema.get("values") or {}, f"{name} value", where)
        return pa.map_(key, value), None
    known = ", ".join([*CONNECT_TYPES, "struct", "array", "map"])
    raise ValidationError(
        f"column {name!r} of {where} has Kafka Connect type {kind!r}"
        + (f" ({logical})" if logical else "")
        + f", which the sink does not map (known: {known}; logical types: "
        f"{', '.join([DECIMAL, *LOGICAL_TYPES])})"
    )


def _decimal(schema: Mapping[str, Any], name: str, where: str) -> pa.DataType:
    """Connect's ``Decimal``: its ``scale`` and ``connect.decimal.precision`` parameters
    (Debezium writes both; without a precision the widest decimal)."""
    params = schema.get("parameters") or {}
    try:
        scale = int(params["scale"])
        precision = int(params.get("connect.decimal.precision", MAX_DECIMAL_PRECISION))
    except (KeyError, TypeError, ValueError):
        raise ValidationError(
            f"column {name!r} of {where} is a Connect Decimal without a valid 'scale' "
            f"parameter: {dict(params)}"
        ) from None
    if not 0 <= scale <= precision <= MAX_DECIMAL_PRECISION:
        raise ValidationError(
            f"column {name!r} of {where} is decimal({precision}, {scale}), which Iceberg, "
            f"Delta and Spark cannot hold (at most {MAX_DECIMAL_PRECISION} digits, scale "
            "0 to precision): map it to a string with Debezium's decimal.handling.mode="
            "string and pass its type with types="
        )
    return pa.decimal128(precision, scale)


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
