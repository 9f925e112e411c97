"""Conversion between Iceberg schemas and Arrow schemas.

Invariants:
- ``schema_to_arrow`` puts each field id in the Arrow field metadata under
  ``PARQUET:field_id``, so Parquet files written from it carry the ids that
  Iceberg readers resolve columns by.
- ``schema_from_arrow`` keeps ids that are present and assigns fresh ones
  (top-level fields first, then nested, as Iceberg's ``assignFreshIds``) when
  none are.
- Arrow types with no exact Iceberg equivalent map to the narrowest Iceberg type
  that holds every value (int8/int16 → int, uint32 → long); lossy ones
  (uint64) raise. Nanosecond timestamps map to the microsecond types unless the
  table is format version 3 (``schema_from_arrow(..., format_version=3)``); a null
  column maps to ``unknown`` (format version 3 only).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import pyarrow as pa

from stream_sink.exceptions import SchemaMismatchError
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
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
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

FIELD_ID_KEY = b"PARQUET:field_id"
DOC_KEY = b"doc"

_PRIMITIVE_TO_ARROW: dict[type, pa.DataType] = {
    BooleanType: pa.bool_(),
    IntegerType: pa.int32(),
    LongType: pa.int64(),
    FloatType: pa.float32(),
    DoubleType: pa.float64(),
    DateType: pa.date32(),
    TimeType: pa.time64("us"),
    TimestampType: pa.timestamp("us"),
    TimestamptzType: pa.timestamp("us", tz="UTC"),
    TimestampNanoType: pa.timestamp("ns"),
    TimestamptzNanoType: pa.timestamp("ns", tz="UTC"),
    UnknownType: pa.null(),
    StringType: pa.string(),
    UUIDType: pa.binary(16),
    BinaryType: pa.binary(),
}


def type_to_arrow(t: IcebergType) -> pa.DataType:
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary(t.length)
    if isinstance(t, StructType):
        return pa.struct([field_to_arrow(f) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(field_to_arrow(t.element_field))
    if isinstance(t, MapType):
        return pa.map_(field_to_arrow(t.key_field), field_to_arrow(t.value_field))
    try:
        return _PRIMITIVE_TO_ARROW[type(t)]
    except KeyError:
        raise SchemaMismatchError(f"no Arrow type for Iceberg type {t}") from None


def field_to_arrow(f: NestedField) -> pa.Field:
    meta = {FIELD_ID_KEY: str(f.field_id).encode()}
    if f.doc:
        meta[DOC_KEY] = f.doc.encode()
    return pa.field(f.name, type_to_arrow(f.field_type), nullable=not f.required, metadata=meta)


def schema_to_arrow(schema: Schema) -> pa.Schema:
    return pa.schema([field_to_arrow(f) for f in schema.fields])


def schema_from_arrow(
    arrow_schema: pa.Schema,
    identifier_fields: list[str] | None = None,
    format_version: int = 2,
) -> Schema:
    """An Iceberg schema for ``arrow_schema``; ids from metadata, or fresh when absent.

    For a table of ``format_version`` 3 nanosecond timestamps (at any depth) become
    ``timestamp_ns`` / ``timestamptz_ns``; before it they become the microsecond types
    (and writing a value with nanoseconds into them fails)."""
    if format_version >= 3:
        return _with_nanos(schema_from_arrow(arrow_schema, identifier_fields), arrow_schema)
    has_ids = _all_have_ids(arrow_schema)
    counter = _IdCounter(0)
    if has_ids:
        fields = [_field_from_arrow(f, None) for f in arrow_schema]
    else:
        ids = [counter.next() for _ in arrow_schema]
        fields = [
            _field_from_arrow(f, counter, fid) for f, fid in zip(arrow_schema, ids, strict=True)
        ]
    schema = Schema(*fields)
    if identifier_fields:
        schema = _required_keys(schema, identifier_fields)
    return schema


def _with_nanos(schema: Schema, arrow_schema: pa.Schema) -> Schema:
    """``schema`` with the fields that are nanosecond timestamps in ``arrow_schema`` (at
    any depth) typed as the nanosecond timestamp types."""
    fields = [_field_nanos(f, a.type) for f, a in zip(schema.fields, arrow_schema, strict=True)]
    return Schema(*fields, identifier_field_ids=schema.identifier_field_ids)


def _field_nanos(f: NestedField, t: pa.DataType) -> NestedField:
    return replace(f, field_type=_type_nanos(f.field_type, t))


def _type_nanos(it: IcebergType, t: pa.DataType) -> IcebergType:
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return TimestamptzNanoType() if t.tz is not None else TimestampNanoType()
    if isinstance(it, StructType):
        kids = _arrow_children(t)
        return StructType(*(_field_nanos(f, k.type) for f, k in zip(it.fields, kids, strict=True)))
    if isinstance(it, ListType):
        element = _type_nanos(it.element_type, t.value_type)
        return replace(it, element_type=element)
    if isinstance(it, MapType):
        key = _type_nanos(it.key_type, t.key_type)
        return replace(it, key_type=key, value_type=_type_nanos(it.value_type, t.item_type))
    return it


def _required_keys(schema: Schema, names: list[str]) -> Schema:
    """Identifier fields must be required; Arrow data is often marked nullable."""
    by_name = set(names)
    fields = [replace(f, required=True) if f.name in by_name else f for f in schema.fields]
    return Schema(*fields).with_identifier_fields(names)


class _IdCounter:
    def __init__(self, start: int) -> None:
        self.value = start

    def next(self) -> int:
        self.value += 1
        return self.value


def _all_have_ids(arrow_schema: pa.Schema) -> bool:
    fields = list(_walk_arrow(arrow_schema))
    with_ids = [f for f in fields if f.metadata and FIELD_ID_KEY in f.metadata]
    if with_ids and len(with_ids) != len(fields):
        missing = [f.name for f in fields if not (f.metadata and FIELD_ID_KEY in f.metadata)]
        raise SchemaMismatchError(
            f"Arrow schema has field ids on some fields only; missing on {missing}"
        )
    return bool(fields) and len(with_ids) == len(fields)


def _walk_arrow(fields: pa.Schema | list[pa.Field]) -> Iterator[pa.Field]:
    for f in fields:
        yield f
        yield from _walk_arrow(_arrow_children(f.type))


def _arrow_children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_field]
    return []


def _field_from_arrow(
    f: pa.Field, counter: _IdCounter | None, fid: int | None = None
) -> NestedField:
    if fid is None:
        assert f.metadata is not None
        fid = int(f.metadata[FIELD_ID_KEY])
    doc = f.metadata.get(DOC_KEY).decode() if f.metadata and DOC_KEY in f.metadata else None
    return NestedField(fid, f.name, _type_from_arrow(f.type, counter, f.name), not f.nullable, doc)


def _child(f: pa.Field, counter: _IdCounter | None, fid: int | None) -> NestedField:
    return _field_from_arrow(f, counter, fid)


def _type_from_arrow(t: pa.DataType, counter: _IdCounter | None, name: str) -> IcebergType:
    if pa.types.is_struct(t):
        children = _arrow_children(t)
        ids = [counter.next() for _ in children] if counter else [None] * len(children)
        return StructType(*(_child(c, counter, i) for c, i in zip(children, ids, strict=True)))
    if pa.types.is_map(t):
        kid = counter.next() if counter else None
        vid = counter.next() if counter else None
        k = _child(t.key_field, counter, kid)
        v = _child(t.item_field, counter, vid)
        return MapType(k.field_id, k.field_type, v.field_id, v.field_type, v.required)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        eid = counter.next() if counter else None
        e = _child(t.value_field, counter, eid)
        return ListType(e.field_id, e.field_type, e.required)
    return arrow_primitive_to_iceberg(t, name)


def arrow_primitive_to_iceberg(t: pa.DataType, name: str = "?") -> IcebergType:
    """The Iceberg type for an Arrow primitive; ``name`` is for the error message."""
    if pa.types.is_boolean(t):
        return BooleanType()
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return IntegerType()
    if pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return IntegerType()
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return LongType()
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return FloatType()
    if pa.types.is_float64(t):
        return DoubleType()
    if pa.types.is_decimal(t) and t.precision <= 38:
        return DecimalType(t.precision, t.scale)
    if pa.types.is_date(t):
        return DateType()
    if pa.types.is_time(t):
        return TimeType()
    if pa.types.is_timestamp(t):
        return TimestamptzType() if t.tz is not None else TimestampType()
    if pa.types.is_null(t):
        return UnknownType()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return StringType()
    if pa.types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return BinaryType()
    raise SchemaMismatchError(f"column {name!r}: Arrow type {t} has no Iceberg equivalent")


def conform_to_schema(
    data: pa.Table | pa.RecordBatch, schema: Schema, where: str, *, invalid_utf8: str = "fail"
) -> pa.Table:
    """``data`` as a table in exactly ``schema``'s Arrow form (order, types, field ids).

    Columns are matched by name; safe widenings are cast; table columns the data
    lacks are filled with their ``write-default``, else nulls (optional ones only).
    Nullability is judged by the values, not by the Arrow flag (Spark and pandas mark
    every column nullable): a null in a required column is refused with its column and
    row position. Raises SchemaMismatchError naming every offending column. Strings
    must be valid UTF-8 (``invalid_utf8``: "fail" or "replace", see :mod:`stream_sink.table.utf8`).
    """
    from stream_sink.table.schema import check_compatible_write

    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    check_compatible_write(schema, _shape_of(table.schema), where)
    target = schema_to_arrow(schema)
    columns = []
    for f, field in zip(target, schema.fields, strict=True):
        if f.name in table.column_names:
            col = table.column(f.name)
            if col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaMismatchError(
                        f"data does not match table {where}: column {f.name!r} "
                        f"cannot be cast from {col.type} to {f.type}: {e}"
                    ) from e
            _check_required(col, f, f.name, where)
            if isinstance(col, pa.ChunkedArray):
                col = checked_strings(col, f.name, where, invalid_utf8)
            columns.append(col)
        else:
            columns.append(_written_default(field, table.num_rows))
    return pa.Table.from_arrays(columns, schema=target)


def _written_default(f: NestedField, n: int) -> pa.Array:
    """What a column the data lacks is written as: its ``write-default``, else nulls."""
    from stream_sink.table.defaults import default_array  # defaults builds on this module

    return default_array(replace(f, initial_default=f.write_default), n)


def checked_strings(col: pa.ChunkedArray, name: str, where: str, mode: str) -> pa.ChunkedArray:
    from stream_sink.table.utf8 import checked_strings as check

    return check(col, name, where, mode, "write.invalid-utf8")


def _shape_of(arrow_schema: pa.Schema) -> Schema:
    """The data's Iceberg view for name/type checks; every field counts as required
    here because nulls are checked on the values by :func:`_check_required`."""
    counter = _IdCounter(10_000_000)
    fields = [_field_from_arrow(_all_required(f), counter, counter.next()) for f in arrow_schema]
    return Schema(*fields)


def _all_required(f: pa.Field) -> pa.Field:
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_all_required(c) for c in _arrow_children(t)])
    elif pa.types.is_map(t):
        t = pa.map_(_all_required(t.key_field), _all_required(t.item_field))
    elif pa.types.is_list(t):
        t = pa.list_(_all_required(t.value_field))
    elif pa.types.is_large_list(t):
        t = pa.large_list(_all_required(t.value_field))
    return pa.field(f.name, t, nullable=pa.types.is_null(t))  # Arrow's null type is nullable


def _check_required(col: pa.ChunkedArray | pa.Array, f: pa.Field, path: str, where: str) -> None:
    """Raise when a required field holds a null where its parent is present."""
    arrays = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    offset = 0
    for arr in arrays:
        if not f.nullable and arr.null_count:
            import pyarrow.compute as pc

            row = offset + int(pc.index(arr.is_null(), True).as_py())
            raise SchemaMismatchError(
                f"data does not match table {where}: required column {path!r} "
                f"has a null at row {row}"
            )
        _check_children(arr, f, path, where)
        offset += len(arr)


def _check_children(arr: pa.Array, f: pa.Field, path: str, where: str) -> None:
    t = f.type
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            child = t.field(i)
            values = arr.field(i)
            if arr.null_count:
                values = values.filter(arr.is_valid())
            _check_required(values, child, f"{path}.{child.name}", where)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        _check_required(arr.flatten(), t.value_field, f"{path}.element", where)
    elif pa.types.is_map(t):
        _check_required(arr.keys, t.key_field, f"{path}.key", where)
        _check_required(arr.items, t.item_field, f"{path}.value", where)
