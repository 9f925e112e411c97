"""Column defaults (spec: "Default values", "JSON single-value serialization").

A field's ``initial-default`` is the value of the column in rows written before the
column existed: readers return it for every row of a data file that lacks the column
(a column added with a default, read from an older file), where a column without a
default reads as null.

Invariants:
- Values are parsed from the JSON single-value serialization per type: booleans and
  numbers as JSON values, decimals, dates, times, timestamps and uuids as ISO / text
  strings (nanosecond timestamps become int nanoseconds, from up to nine fraction
  digits), binary and fixed as hex strings, a struct as an object keyed by field id
  (a child left out takes its own default).
- A default that does not parse as its type raises CorruptMetadataError naming the
  field: a reader never guesses a value.
- A non-null default of a list or map is refused (UnsupportedError); the spec allows
  only null there.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from stream_sink.exceptions import CorruptMetadataError, UnsupportedError, ValidationError
from stream_sink.table.arrow import type_to_arrow
from stream_sink.table.nanos import format_nanos, parse_nanos
from stream_sink.table.types import (
    NANO_TIMESTAMPS,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)


def default_array(f: NestedField, n: int) -> pa.Array:
    """``n`` values of ``f`` for rows of a file that lacks it: its initial default
    repeated, else nulls."""
    want = type_to_arrow(f.field_type)
    if f.initial_default is None:
        if isinstance(f.field_type, StructType):
            return _struct_of_defaults(f.field_type, n, nulls=True)
        return pa.nulls(n, want)
    value = initial_default(f)
    if isinstance(f.field_type, StructType):
        return _struct_of_defaults(f.field_type, n, nulls=value is None, given=value)
    return pa.repeat(pa.scalar(value, want), n) if n else pa.array([], want)


def _struct_of_defaults(
    t: StructType, n: int, nulls: bool, given: dict[int, Any] | None = None
) -> pa.Array:
    """A struct column of ``n`` rows: null structs (``nulls``), or structs whose
    children are the given values, else the children's own defaults."""
    want = type_to_arrow(t)
    if nulls:
        return pa.nulls(n, want)
    children = []
    for child in t.fields:
        if given and child.field_id in given:
            children.append(
                pa.repeat(pa.scalar(given[child.field_id], want.field(child.name).type), n)
            )
        else:
            children.append(default_array(child, n))
    return pa.StructArray.from_arrays(children, fields=list(want))


def initial_default(f: NestedField) -> Any:
    """The field's initial default as a Python value pyarrow takes for its type."""
    if f.initial_default is None:
        return None
    return parse_default(f, f.initial_default)


def parse_default(f: NestedField, text: str) -> Any:
    """The JSON single-value ``text`` as a Python value of ``f``'s type."""
    try:
        return _value(f.field_type, json.loads(text))
    except UnsupportedError:
        raise
    except (ValueError, TypeError, KeyError, InvalidOperation, OverflowError) as e:
        raise CorruptMetadataError(
            f"field {f.name!r} (id {f.field_id}): default {text} is not a {f.field_type} value: {e}"
        ) from e


def _value(t: IcebergType, v: Any) -> Any:
    if v is None:
        return None
    if isinstance(t, BooleanType):
        if not isinstance(v, bool):
            raise TypeError("not a JSON boolean")
        return v
    if isinstance(t, (IntegerType, LongType)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("not a JSON integer")
        return v
    if isinstance(t, (FloatType, DoubleType)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("not a JSON number")
        return float(v)
    if isinstance(t, DecimalType):
        return Decimal(str(v)).quantize(Decimal(1).scaleb(-t.scale))
    if isinstance(t, DateType):
        return dt.date.fromisoformat(_text(v))
    if isinstance(t, TimeType):
        return dt.time.fromisoformat(_text(v))
    if isinstance(t, (TimestampType, TimestamptzType)):
        return _timestamp(_text(v), isinstance(t, TimestamptzType))
    if isinstance(t, NANO_TIMESTAMPS):
        return parse_nanos(_text(v), isinstance(t, TimestamptzNanoType))
    if isinstance(t, StringType):
        return _text(v)
    if isinstance(t, UUIDType):
        return uuid.UUID(_text(v)).bytes
    if isinstance(t, (BinaryType, FixedType)):
        return bytes.fromhex(_text(v))
    if isinstance(t, StructType):
        if not isinstance(v, dict):
            raise TypeError("a struct default is a JSON object keyed by field id")
        by_id = {c.field_id: c for c in t.fields}
        return {int(k): _value(by_id[int(k)].field_type, x) for k, x in v.items()}
    if isinstance(t, (ListType, MapType)):
        raise UnsupportedError(f"a non-null default of a {t} column is not supported")
    raise TypeError(f"no default values of type {t}")


def _text(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError("not a JSON string")
    return v


def _timestamp(text: str, with_zone: bool) -> dt.datetime:
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if with_zone:
        if value.tzinfo is None:
            raise ValueError("a timestamptz default needs an offset")
        return value.astimezone(dt.timezone.utc)
    if value.tzinfo is not None:
        raise ValueError("a timestamp default has no offset")
    return value


def default_to_json(t: IcebergType, value: Any, where: str) -> str:
    """``value`` of a primitive type ``t`` in the JSON single-value serialization (the
    form ``parse_default`` reads back; a value it would not read back is refused)."""
    if isinstance(t, (ListType, MapType, StructType)):
        raise UnsupportedError(f"column {where!r}: defaults of nested types are not supported")
    if isinstance(t, NANO_TIMESTAMPS) and isinstance(value, int) and not isinstance(value, bool):
        out: Any = format_nanos(value, isinstance(t, TimestamptzNanoType))
    elif isinstance(value, (bool, int, float)) and not isinstance(t, DecimalType):
        out = value
    elif isinstance(value, (bytes, bytearray)) and not isinstance(t, UUIDType):
        out = bytes(value).hex()
    elif isinstance(value, (dt.datetime, dt.date, dt.time)):
        out = value.isoformat()
    else:
        out = str(value)
    text = json.dumps(out)
    probe = NestedField(0, where, t, False)
    try:
        parse_default(probe, text)
    except CorruptMetadataError as e:
        raise ValidationError(f"column {where!r}: default {value!r} is not a {t} value") from e
    return text
