"""Iceberg types as Spark SQL types, and Arrow data in the form Spark takes it.

Mapping (as Apache Iceberg's Spark integration, except where noted):

=====================  ==============================================================
Iceberg                Spark
=====================  ==============================================================
boolean, int, long     BooleanType, IntegerType, LongType
float, double          FloatType, DoubleType
decimal(P, S)          DecimalType(P, S)
date                   DateType
time                   TimeType(6) when ``spark.sql.timeType.enabled``, else LongType:
                       microseconds since midnight (Spark analyses TIME only under
                       that flag; Java Iceberg cannot read time columns in Spark)
timestamp              TimestampNTZType (no zone: the wall-clock value, never shifted)
timestamptz            TimestampType (an instant; Spark shows it in the session zone)
timestamp_ns,          none: refused, naming the column (Spark has no nanosecond type;
timestamptz_ns         Apache Iceberg's Spark integration refuses such tables too)
unknown                NullType
string                 StringType
uuid                   StringType, canonical lower-case ``8-4-4-4-12`` form
fixed(L), binary       BinaryType
struct, list, map      StructType, ArrayType, MapType (nullability: see below)
=====================  ==============================================================

Nullability follows ``required``, except that a field inside a struct that can be null
(an optional struct, or one nested in something optional) is nullable: where the
struct is null its children are null too, and pyspark's ``toArrow`` refuses nulls in a
non-nullable child.

Invariant: :func:`to_spark_arrow` turns a column that has the Arrow type of
``type_to_arrow(t)`` into exactly the Arrow type Spark derives from
``spark_type(t)`` (``want``); Spark refuses any other Arrow type in ``mapInArrow``
output (fixed-size binary, microsecond times).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.exceptions import UnsupportedError
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
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

if TYPE_CHECKING:
    from pyspark.sql import types as st


def spark_schema(fields: Sequence[NestedField], *, time_type: bool = False) -> st.StructType:
    """The Spark schema of rows with top-level ``fields``; ``time_type``: Spark's TIME
    type is enabled (``spark.sql.timeType.enabled``)."""
    from pyspark.sql import types as st

    return st.StructType([_spark_field(f, False, time_type) for f in fields])


def _spark_field(f: NestedField, parent_nullable: bool, time_type: bool) -> st.StructField:
    from pyspark.sql import types as st

    nullable = parent_nullable or not f.required
    metadata = {"comment": f.doc} if f.doc else {}
    try:
        data_type = spark_type(f.field_type, nullable, time_type=time_type)
    except UnsupportedError as e:
        raise UnsupportedError(f"column {f.name!r}: {e}") from None
    return st.StructField(f.name, data_type, nullable, metadata)


def spark_type(t: IcebergType, nullable: bool = True, *, time_type: bool = False) -> st.DataType:
    """The Spark type of Iceberg type ``t`` (see the module table); ``nullable``: whether
    a value of this type can be null where it appears."""
    from pyspark.sql import types as st

    if isinstance(t, StructType):
        return st.StructType([_spark_field(f, nullable, time_type) for f in t.fields])
    if isinstance(t, ListType):
        element = not t.element_required
        return st.ArrayType(spark_type(t.element_type, element, time_type=time_type), element)
    if isinstance(t, MapType):
        value = not t.value_required
        key_type = spark_type(t.key_type, False, time_type=time_type)
        return st.MapType(key_type, spark_type(t.value_type, value, time_type=time_type), value)
    if isinstance(t, DecimalType):
        return st.DecimalType(t.precision, t.scale)
    if isinstance(t, TimeType):
        return st.TimeType(6) if time_type else st.LongType()
    if isinstance(t, NANO_TIMESTAMPS):
        raise UnsupportedError(
            f"Iceberg type {t} has no Spark type: Spark timestamps stop at microseconds "
            "and truncating would change the values (Apache Iceberg's Spark integration "
            "refuses such tables too): leave the column out (columns=[...]) or read it with "
            "table.scan()"
        )
    simple: dict[type, st.DataType] = {
        BooleanType: st.BooleanType(),
        IntegerType: st.IntegerType(),
        LongType: st.LongType(),
        FloatType: st.FloatType(),
        DoubleType: st.DoubleType(),
        DateType: st.DateType(),
        TimestampType: st.TimestampNTZType(),
        TimestamptzType: st.TimestampType(),
        StringType: st.StringType(),
        UUIDType: st.StringType(),
        FixedType: st.BinaryType(),
        BinaryType: st.BinaryType(),
        UnknownType: st.NullType(),
    }
    try:
        return simple[type(t)]
    except KeyError:
        raise UnsupportedError(f"Iceberg type {t} has no Spark type") from None


def spark_arrow_schema(schema: st.StructType, timezone: str, large_types: bool) -> pa.Schema:
    """The Arrow schema Spark expects for rows of ``schema`` (its own conversion)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone=timezone, prefers_large_types=large_types)


# --- executor side: no pyspark below this line -----------------------------------------------


def to_spark_batch(table: pa.Table, fields: Sequence[NestedField], want: pa.Schema) -> pa.Table:
    """``table`` (columns of ``fields``, in order) with the Arrow types of ``want``; no
    fields: ``table``'s row count without columns."""
    if not fields:
        return table.select([])
    columns = [
        pa.chunked_array([to_spark_arrow(c, f.field_type, w.type) for c in col.chunks], w.type)
        for col, f, w in zip(table.columns, fields, want, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=want)


def to_spark_arrow(arr: pa.Array, t: IcebergType, want: pa.DataType) -> pa.Array:
    """``arr`` (Arrow type of ``type_to_arrow(t)``) as Arrow type ``want``."""
    mask = arr.is_null() if arr.null_count else None
    if isinstance(t, StructType):
        children = [
            to_spark_arrow(arr.field(i), f.field_type, want.field(i).type)
            for i, f in enumerate(t.fields)
        ]
        return pa.StructArray.from_arrays(children, fields=list(want), mask=mask)
    if isinstance(t, ListType):
        values = to_spark_arrow(arr.values, t.element_type, want.value_type)
        return pa.ListArray.from_arrays(arr.offsets, values, type=want, mask=mask)
    if isinstance(t, MapType):
        keys = to_spark_arrow(arr.values.field(0), t.key_type, want.key_type)
        items = to_spark_arrow(arr.values.field(1), t.value_type, want.item_type)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=want, mask=mask)
    if isinstance(t, UUIDType):
        arr = uuid_strings(arr)
    return arr if arr.type == want else arr.cast(want)


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_DIGITS = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])


def uuid_strings(arr: pa.Array) -> pa.Array:
    """16-byte UUIDs as their canonical strings (``8-4-4-4-12`` lower-case hex)."""
    n = len(arr)
    if n == 0:
        return pa.array([], pa.string())
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8)[arr.offset * 16 : (arr.offset + n) * 16]
    raw = raw.reshape(n, 16)
    text = np.full((n, 36), ord("-"), dtype=np.uint8)
    digits = np.empty((n, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 15]
    text[:, _DIGITS] = digits
    offsets = np.arange(0, 36 * (n + 1), 36, dtype=np.int32)
    out = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text.tobytes()))
    if arr.null_count:
        out = pc.if_else(arr.is_valid(), out, pa.scalar(None, pa.string()))
    return out
