"""An Avro data or delete file (``write.format.default=avro``, migrated Hive tables), read
whole with fastavro into Arrow: one chunk.

The records are decoded without their logical types (:func:`decode_avro`: ints for dates
and times, bytes for decimals) and turned into Arrow here, column by column. Apache
Iceberg's Avro writer gives each record field a ``field-id``, each array an
``element-id``, each map a ``key-id`` and ``value-id``, and writes a map with non-string
keys as an array of key/value records (``"logicalType": "map"``); the Arrow fields carry
those ids as Parquet field ids, so :mod:`stream_sink.read.file_projection` matches them
as it matches Parquet's. A file without ids (written by Hive) is read by the table's
name mapping. A union other than ``["null", T]`` is refused (Iceberg writes no other).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from stream_sink.exceptions import CorruptMetadataError
from stream_sink.read.data_files import NoChunkFilter
from stream_sink.read.expressions import Expression
from stream_sink.table.arrow import FIELD_ID_KEY
from stream_sink.table.avro_schemas import AvroSchema, decode_avro, named_types, resolve

Named = Mapping[str, AvroSchema]

_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "null": pa.null(),
    "enum": pa.string(),
}
_LOGICAL = {
    "date": pa.date32(),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    "timestamp-millis": pa.timestamp("ms"),
    "timestamp-micros": pa.timestamp("us"),
    "timestamp-nanos": pa.timestamp("ns"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
}


class AvroDataFile:
    """The records of the Avro file ``source`` (``location`` names it)."""

    def __init__(self, source: pa.NativeFile, location: str) -> None:
        self.location = location
        try:
            contents = decode_avro(source.read(), location)
        except CorruptMetadataError as e:
            raise ValueError(str(e)) from e
        self._records = contents.records
        self._named = named_types(contents.schema)
        self._fields = {f["name"]: f for f in contents.schema.get("fields", [])}
        self.schema = pa.schema(
            [
                _field(f["name"], f["type"], f.get("field-id"), self._named)
                for f in self._fields.values()
            ]
        )
        self.num_chunks = 1

    def chunk_rows(self, chunk: int) -> int:
        return len(self._records)

    def read_chunk(self, chunk: int, columns: Sequence[str]) -> pa.Table:
        return self.read(columns)

    def read(self, columns: Sequence[str]) -> pa.Table:
        n = len(self._records)
        arrays = [self._column(name) for name in columns]
        if not arrays:  # keep the row count: a count reads no column
            return pa.table({"_": pa.nulls(n)}).select([])
        return pa.Table.from_arrays(
            arrays, schema=pa.schema([self.schema.field(c) for c in columns])
        )

    def _column(self, name: str) -> pa.Array:
        values = [r.get(name) for r in self._records]
        return _array(values, self._fields[name]["type"], self._named)

    def chunk_filter(self, expr: Expression, fields: Mapping[int, pa.Field]) -> NoChunkFilter:
        return NoChunkFilter()


# --- the Arrow schema ---------------------------------------------------------------------


def _field(name: str, schema: AvroSchema, field_id: Any, named: Named) -> pa.Field:
    base, nullable = _unwrap(schema, named)
    meta = {FIELD_ID_KEY: str(field_id).encode()} if field_id is not None else None
    return pa.field(name, _arrow_type(base, named), nullable=nullable, metadata=meta)


def _unwrap(schema: AvroSchema, named: Named) -> tuple[AvroSchema, bool]:
    """The type of a ``["null", T]`` union or of a plain type, and whether null is allowed."""
    schema = resolve(schema, named)
    if not isinstance(schema, list):
        return schema, schema == "null"
    branches = [s for s in schema if s != "null"]
    if len(branches) != 1:
        raise ValueError(f"Avro union {schema} is not an optional type, which Iceberg writes")
    return resolve(branches[0], named), len(branches) < len(schema)


def _arrow_type(schema: AvroSchema, named: Named) -> pa.DataType:
    if isinstance(schema, str):
        if schema not in _PRIMITIVES:
            raise ValueError(f"Avro type {schema!r} is unknown")
        return _PRIMITIVES[schema]
    kind, logical = schema.get("type"), schema.get("logicalType")
    if kind == "record":
        return pa.struct(
            [_field(f["name"], f["type"], f.get("field-id"), named) for f in schema["fields"]]
        )
    if kind == "array" and _is_pair_map(schema, named):
        key, value = _pair_fields(schema, named)
        return pa.map_(
            _field("key", key["type"], key.get("field-id"), named),
            _field("value", value["type"], value.get("field-id"), named),
        )
    if kind == "array":
        return pa.list_(_field("element", schema["items"], schema.get("element-id"), named))
    if kind == "map":
        key = pa.field("key", pa.string(), False, _id_meta(schema.get("key-id")))
        return pa.map_(key, _field("value", schema["values"], schema.get("value-id"), named))
    if logical == "decimal":
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    if kind == "fixed":
        return pa.binary(int(schema["size"]))
    if logical in _LOGICAL:
        t = _LOGICAL[logical]
        utc = pa.types.is_timestamp(t) and schema.get("adjust-to-utc") is True
        return pa.timestamp(t.unit, tz="UTC") if utc else t
    return _arrow_type(str(kind), named)


def _id_meta(field_id: Any) -> dict[bytes, bytes] | None:
    return {FIELD_ID_KEY: str(field_id).encode()} if field_id is not None else None


def _is_pair_map(schema: Mapping[str, Any], named: Named) -> bool:
    items, _ = _unwrap(schema["items"], named)
    names = [f["name"] for f in items.get("fields", [])] if isinstance(items, dict) else []
    return schema.get("logicalType") == "map" and names == ["key", "value"]


def _pair_fields(schema: Mapping[str, Any], named: Named) -> tuple[dict[str, Any], dict[str, Any]]:
    items, _ = _unwrap(schema["items"], named)
    key, value = items["fields"]
    return key, value


# --- the Arrow data --------------------------------------------------------------------


def _array(values: list[Any], schema: AvroSchema, named: Named) -> pa.Array:
    """``values`` (decoded without logical types) as the Arrow type of ``schema``."""
    base, _ = _unwrap(schema, named)
    t = _arrow_type(base, named)
    mask = pa.array([v is None for v in values], pa.bool_())
    if pa.types.is_struct(t):
        assert isinstance(base, dict)
        children = [
            _array([v.get(f["name"]) if v is not None else None for v in values], f["type"], named)
            for f in base["fields"]
        ]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_map(t):
        assert isinstance(base, dict)
        return _map_array(values, base, named, t, mask)
    if pa.types.is_list(t):
        assert isinstance(base, dict)
        offsets, flat = _flatten(values)
        items = _array(flat, base["items"], named)
        return pa.ListArray.from_arrays(offsets, items, type=t, mask=mask)
    if pa.types.is_decimal(t):
        return pa.array([_decimal(v, t.scale) for v in values], t)
    storage = pa.int64() if pa.types.is_timestamp(t) or pa.types.is_time64(t) else None
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        storage = pa.int32()
    if storage is not None:
        return pa.array(values, storage).cast(t)
    return pa.array(values, t)


def _map_array(
    values: list[Any], base: Mapping[str, Any], named: Named, t: pa.MapType, mask: pa.Array
) -> pa.Array:
    if base.get("type") == "map":  # an Avro map: string keys
        pairs = [list(v.items()) if v is not None else None for v in values]
        key_schema: AvroSchema = "string"
        value_schema = base["values"]
    else:  # an array of key/value records
        pairs = [[(kv["key"], kv["value"]) for kv in v] if v is not None else None for v in values]
        key, value = _pair_fields(base, named)
        key_schema, value_schema = key["type"], value["type"]
    offsets, flat = _flatten(pairs)
    keys = _array([k for k, _ in flat], key_schema, named)
    items = _array([x for _, x in flat], value_schema, named)
    return pa.MapArray.from_arrays(offsets, keys, items, type=t, mask=mask)


def _flatten(values: list[Any]) -> tuple[pa.Array, list[Any]]:
    offsets: list[int] = [0]
    flat: list[Any] = []
    for v in values:
        flat.extend(v or ())
        offsets.append(len(flat))
    return pa.array(offsets, pa.int32()), flat


def _decimal(raw: bytes | None, scale: int) -> Decimal | None:
    """A decimal's unscaled big-endian two's-complement bytes as a Decimal."""
    if raw is None:
        return None
    return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)
