"""Iceberg data types (spec: "Schemas and Data Types").

Invariants:
- Types are immutable values; two types are equal iff the spec says they are.
- Every nested field, list element and map key/value has a field id that is
  unique within its schema (checked by :class:`~stream_sink.table.schema.Schema`).
- ``str(t)`` and :func:`type_to_json` give the spec's JSON form; :func:`type_from_json`
  is its inverse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from stream_sink.exceptions import CorruptMetadataError, UnsupportedTypeError


class IcebergType:
    """Base of all types."""

    @property
    def is_primitive(self) -> bool:
        return isinstance(self, PrimitiveType)

    @property
    def is_nested(self) -> bool:
        return not self.is_primitive


class PrimitiveType(IcebergType):
    """A type with no children. Subclasses are frozen dataclasses or singletons."""

    _name: str = ""

    def __str__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))


class BooleanType(PrimitiveType):
    _name = "boolean"


class IntegerType(PrimitiveType):
    _name = "int"


class LongType(PrimitiveType):
    _name = "long"


class FloatType(PrimitiveType):
    _name = "float"


class DoubleType(PrimitiveType):
    _name = "double"


class DateType(PrimitiveType):
    """Days since 1970-01-01."""

    _name = "date"


class TimeType(PrimitiveType):
    """Microseconds since midnight."""

    _name = "time"


class TimestampType(PrimitiveType):
    """Microseconds since the epoch, without zone."""

    _name = "timestamp"


class TimestamptzType(PrimitiveType):
    """Microseconds since the epoch, UTC-adjusted."""

    _name = "timestamptz"


class TimestampNanoType(PrimitiveType):
    """Nanoseconds since the epoch, without zone (format version 3)."""

    _name = "timestamp_ns"


class TimestamptzNanoType(PrimitiveType):
    """Nanoseconds since the epoch, UTC-adjusted (format version 3)."""

    _name = "timestamptz_ns"


class UnknownType(PrimitiveType):
    """A column whose type is not known yet (format version 3): always optional,
    always null, never stored in data files."""

    _name = "unknown"


class StringType(PrimitiveType):
    _name = "string"


class UUIDType(PrimitiveType):
    _name = "uuid"


class BinaryType(PrimitiveType):
    _name = "binary"


class FixedType(PrimitiveType):
    def __init__(self, length: int) -> None:
        if length <= 0:
            raise ValueError(f"fixed length must be positive, got {length}")
        self.length = length

    def __str__(self) -> str:
        return f"fixed[{self.length}]"

    def __repr__(self) -> str:
        return f"FixedType({self.length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedType) and other.length == self.length

    def __hash__(self) -> int:
        return hash(("fixed", self.length))


class DecimalType(PrimitiveType):
    def __init__(self, precision: int, scale: int) -> None:
        if not 0 < precision <= 38:
            raise ValueError(f"decimal precision must be in 1..38, got {precision}")
        self.precision = precision
        self.scale = scale

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"

    def __repr__(self) -> str:
        return f"DecimalType({self.precision}, {self.scale})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DecimalType)
            and other.precision == self.precision
            and other.scale == self.scale
        )

    def __hash__(self) -> int:
        return hash(("decimal", self.precision, self.scale))


@dataclass(frozen=True)
class NestedField:
    """A named, id'd field of a struct. ``required`` means never null.

    ``initial_default`` and ``write_default`` are the spec's JSON single-value
    serialization of the field's defaults, kept as JSON text (so metadata rewritten
    by this library keeps them as written); :mod:`stream_sink.table.defaults` reads them.
    """

    field_id: int
    name: str
    field_type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: str | None = None
    write_default: str | None = None

    @property
    def optional(self) -> bool:
        return not self.required

    def __str__(self) -> str:
        req = "required" if self.required else "optional"
        return f"{self.field_id}: {self.name}: {req} {self.field_type}"


@dataclass(frozen=True, eq=True)
class StructType(IcebergType):
    fields: tuple[NestedField, ...] = field(default_factory=tuple)

    def __init__(self, *fields: NestedField) -> None:
        object.__setattr__(self, "fields", tuple(fields))

    def __str__(self) -> str:
        return "struct<" + ", ".join(str(f) for f in self.fields) + ">"


@dataclass(frozen=True)
class ListType(IcebergType):
    element_id: int
    element_type: IcebergType
    element_required: bool = False

    @property
    def element_field(self) -> NestedField:
        return NestedField(self.element_id, "element", self.element_type, self.element_required)

    def __str__(self) -> str:
        return f"list<{self.element_type}>"


@dataclass(frozen=True)
class MapType(IcebergType):
    key_id: int
    key_type: IcebergType
    value_id: int
    value_type: IcebergType
    value_required: bool = False

    @property
    def key_field(self) -> NestedField:
        return NestedField(self.key_id, "key", self.key_type, True)

    @property
    def value_field(self) -> NestedField:
        return NestedField(self.value_id, "value", self.value_type, self.value_required)

    def __str__(self) -> str:
        return f"map<{self.key_type}, {self.value_type}>"


def child_fields(t: IcebergType) -> tuple[NestedField, ...]:
    """The direct children of a nested type as fields (list element, map key/value)."""
    if isinstance(t, StructType):
        return t.fields
    if isinstance(t, ListType):
        return (t.element_field,)
    if isinstance(t, MapType):
        return (t.key_field, t.value_field)
    return ()


_SIMPLE: dict[str, PrimitiveType] = {
    t._name: t()
    for t in (
        BooleanType,
        IntegerType,
        LongType,
        FloatType,
        DoubleType,
        DateType,
        TimeType,
        TimestampType,
        TimestamptzType,
        TimestampNanoType,
        TimestamptzNanoType,
        UnknownType,
        StringType,
        UUIDType,
        BinaryType,
    )
}
_UNSUPPORTED_V3 = frozenset({"variant"})

NANO_TIMESTAMPS = (TimestampNanoType, TimestamptzNanoType)
"""The nanosecond timestamp types; their internal values are int nanoseconds."""
MICRO_TIMESTAMPS = (TimestampType, TimestamptzType)
"""The microsecond timestamp types; their internal values are int microseconds."""
V3_TYPES = (TimestampNanoType, TimestamptzNanoType, UnknownType)
"""Types a table may hold from format version 3 on (the spec's "added by v3")."""
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\[\s*(\d+)\s*\]$")


def primitive_from_string(text: str) -> PrimitiveType:
    """Parse a primitive type name as the spec writes it (``decimal(9, 2)``, ``fixed[16]``)."""
    s = text.strip().lower()
    if s in _SIMPLE:
        return _SIMPLE[s]
    if m := _DECIMAL.match(s):
        return DecimalType(int(m.group(1)), int(m.group(2)))
    if m := _FIXED.match(s):
        return FixedType(int(m.group(1)))
    if s in _UNSUPPORTED_V3 or s.startswith(("geometry", "geography")):
        raise UnsupportedTypeError(text, "Iceberg format version 3")
    raise CorruptMetadataError(f"unknown primitive type {text!r}")


JsonType = str | dict[str, Any]


def v3_types_in(t: IcebergType) -> list[str]:
    """The names of the format-version-3 types in ``t`` (itself or nested), in order."""
    if isinstance(t, V3_TYPES):
        return [str(t)]
    return [name for f in child_fields(t) for name in v3_types_in(f.field_type)]


def type_to_json(t: IcebergType) -> JsonType:
    """The spec's JSON form of a type."""
    if isinstance(t, PrimitiveType):
        return str(t)
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [field_to_json(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {
            "type": "list",
            "element-id": t.element_id,
            "element": type_to_json(t.element_type),
            "element-required": t.element_required,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "key-id": t.key_id,
            "key": type_to_json(t.key_type),
            "value-id": t.value_id,
            "value": type_to_json(t.value_type),
            "value-required": t.value_required,
        }
    raise TypeError(f"not an Iceberg type: {t!r}")


def field_to_json(f: NestedField) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f.field_id,
        "name": f.name,
        "required": f.required,
        "type": type_to_json(f.field_type),
    }
    if f.doc is not None:
        out["doc"] = f.doc
    if f.initial_default is not None:
        out["initial-default"] = json.loads(f.initial_default)
    if f.write_default is not None:
        out["write-default"] = json.loads(f.write_default)
    return out


def _json_text(obj: Any, key: str) -> str | None:
    """A default as canonical JSON text; an absent key and JSON null are no default."""
    value = obj.get(key)
    return None if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)


def type_from_json(obj: Any) -> IcebergType:
    """Inverse of :func:`type_to_json`; corrupt input raises CorruptMetadataError."""
    if isinstance(obj, str):
        return primitive_from_string(obj)
    if not isinstance(obj, dict):
        raise CorruptMetadataError(f"type must be a string or object, got {obj!r}")
    try:
        kind = obj["type"]
        if kind == "struct":
            return StructType(*(field_from_json(f) for f in obj["fields"]))
        if kind == "list":
            return ListType(
                int(obj["element-id"]),
                type_from_json(obj["element"]),
                bool(obj["element-required"]),
            )
        if kind == "map":
            return MapType(
                int(obj["key-id"]),
                type_from_json(obj["key"]),
                int(obj["value-id"]),
                type_from_json(obj["value"]),
                bool(obj["value-required"]),
            )
    except KeyError as e:
        raise CorruptMetadataError(f"type {obj!r} lacks {e}") from e
    raise CorruptMetadataError(f"unknown nested type {obj!r}")


def field_from_json(obj: Any) -> NestedField:
    try:
        return _field_from_json(obj)
    except UnsupportedTypeError as e:
        raise e.within(str(obj.get("name"))) from None


def _field_from_json(obj: Any) -> NestedField:
    try:
        return NestedField(
            field_id=int(obj["id"]),
            name=str(obj["name"]),
            field_type=type_from_json(obj["type"]),
            required=bool(obj["required"]),
            doc=obj.get("doc"),
            initial_default=_json_text(obj, "initial-default"),
            write_default=_json_text(obj, "write-default"),
        )
    except (KeyError, TypeError) as e:
        raise CorruptMetadataError(f"field {obj!r} is malformed: {e}") from e
