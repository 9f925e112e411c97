"""Reading a data or delete file's columns into a target schema, by field id.

The file is Parquet, ORC or Avro (:mod:`stream_sink.read.data_files` opens it); its
Arrow schema carries each column's field id as the Parquet field id
(``PARQUET:field_id``, also what the Avro reader puts there from ``field-id``) or as ORC's
``iceberg.id`` attribute, which pyarrow's ORC reader keeps in the field metadata.

Invariants:
- Columns are matched by field id, at every nesting level, never by name: a renamed
  column reads under its new name, a dropped-and-re-added name reads as nulls. Files
  without any field ids (added with pyiceberg's ``add_files``, migrated, imported) take
  their ids from the table's name mapping (:mod:`stream_sink.table.name_mapping`), at
  every nesting level; a column the mapping does not list is not read. Such a file in a
  table without a name mapping is refused (readers disagree on it: Java matches by
  position, pyiceberg refuses), except for delete files, which are matched by name.
- A target field the file lacks comes back as the file's partition value when the
  column is identity-partitioned, else as its ``initial-default``, else as nulls
  (spec: "Column Projection"), inside structs too.
- Results have exactly the Arrow type of ``schema_to_arrow`` for the target,
  widening promoted columns (int→long, float→double, decimal precision) and taking
  the storage a format gives a type (ORC's binary for fixed and uuid, its long for time,
  nanosecond timestamps for microsecond ones) to the type's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from stream_sink.exceptions import SchemaMismatchError
from stream_sink.read.literals import to_arrow_array
from stream_sink.table.arrow import FIELD_ID_KEY, field_to_arrow, type_to_arrow
from stream_sink.table.defaults import default_array
from stream_sink.table.name_mapping import NAME_MAPPING_PROPERTY, MappedField, NameMapping, find
from stream_sink.table.types import (
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StructType,
    UnknownType,
)

#: How a file's columns get field ids: ``None`` for ids embedded in the file, else
#: the name-mapping entries of one nesting level.
Scope = tuple[MappedField, ...] | None


class FileProjection:
    """How to read ``fields`` (top-level target fields) out of one file.

    ``name_mapping``: the table's (None when it has none). ``location`` names the
    file in errors. ``by_name``: match a file without field ids by column name when
    the table has no name mapping (delete files) instead of refusing it.
    """

    def __init__(
        self,
        file_schema: pa.Schema,
        fields: Sequence[NestedField],
        name_mapping: NameMapping | None = None,
        *,
        location: str = "",
        by_name: bool = True,
    ) -> None:
        self.fields = list(fields)
        self._scope = _file_scope(file_schema, name_mapping, location, by_name)
        if self._scope is None and not _has_ids(file_schema) and by_name:
            names = {f.name: i for i, f in enumerate(file_schema)}
            found = {f.field_id: names.get(f.name) for f in self.fields}
        else:
            by_id = _ids(list(file_schema), self._scope)
            found = {f.field_id: by_id.get(f.field_id) for f in self.fields}
        self._file_schema = file_schema
        self._index = {fid: i for fid, i in found.items() if i is not None}
        self.columns = sorted({file_schema.field(i).name for i in self._index.values()})
        self.target = pa.schema([field_to_arrow(f) for f in self.fields])

    def file_fields(self) -> dict[int, pa.Field]:
        """The file's top-level Arrow field of each target field it holds, by field id."""
        return {fid: self._file_schema.field(i) for fid, i in self._index.items()}

    def conform(self, raw: pa.Table, constants: Mapping[int, Any] | None = None) -> pa.Table:
        """``raw`` (the file's ``columns``, read from it) in the target schema."""
        n = raw.num_rows
        if not self.fields:
            return raw.select([])
        out = []
        for f in self.fields:
            i = self._index.get(f.field_id)
            if i is not None:
                file_field = self._file_schema.field(i)
                scope = _child_scope(file_field, self._scope)
                out.append(_conform_chunked(raw.column(file_field.name), f.field_type, scope))
            elif constants and f.field_id in constants and constants[f.field_id] is not None:
                value = to_arrow_array(f.field_type, [constants[f.field_id]])[0]
                out.append(pa.chunked_array([pa.repeat(value, n)], type_to_arrow(f.field_type)))
            else:
                out.append(pa.chunked_array([default_array(f, n)]))
        return pa.Table.from_arrays(out, schema=self.target)


def _file_scope(
    schema: pa.Schema, mapping: NameMapping | None, location: str, by_name: bool
) -> Scope:
    if _has_ids(schema) or not len(schema):
        return None
    if mapping is not None:
        return mapping.fields
    if by_name:
        return None
    raise SchemaMismatchError(
        f"data file {location} has no field ids and the table has no name mapping "
        f"(table property {NAME_MAPPING_PROPERTY}), so which column is which field is "
        "unknown (Java would match its columns by position, pyiceberg refuses it). Set "
        f"{NAME_MAPPING_PROPERTY} to a name mapping of the schema the file was written "
        "with (pyiceberg's add_files and Java's migrate procedures write one)"
    )


def _has_ids(schema: pa.Schema) -> bool:
    return any(_field_id(f) is not None for f in schema)


def _ids(fields: Sequence[pa.Field], scope: Scope) -> dict[int, int]:
    """Field id -> position among ``fields``, for the fields that have an id."""
    out = {}
    for i, f in enumerate(fields):
        fid = _id_of(f, scope)
        if fid is not None:
            out[fid] = i
    return out


def _id_of(f: pa.Field, scope: Scope) -> int | None:
    if scope is None:
        return _field_id(f)
    entry = find(scope, f.name)
    return None if entry is None else entry.field_id


def _child_scope(f: pa.Field, scope: Scope) -> Scope:
    """The scope of ``f``'s children: the entries under the mapping entry naming ``f``
    (none when the mapping does not name it: then no child has an id either)."""
    if scope is None:
        return None
    entry = find(scope, f.name)
    return () if entry is None else entry.fields


#: ORC's type attribute holding a column's field id (Apache Iceberg's ORC writer).
ORC_FIELD_ID_KEY = b"iceberg.id"


def _field_id(f: pa.Field) -> int | None:
    meta = f.metadata or {}
    raw = meta.get(FIELD_ID_KEY, meta.get(ORC_FIELD_ID_KEY))
    return int(raw) if raw is not None else None


def _conform_chunked(col: pa.ChunkedArray, t: IcebergType, scope: Scope) -> pa.ChunkedArray:
    want = type_to_arrow(t)
    if col.type == want and not isinstance(t, (StructType, ListType, MapType)):
        return col
    return pa.chunked_array([conform_array(c, t, scope) for c in col.chunks], want)


def conform_array(arr: pa.Array, t: IcebergType, scope: Scope = None) -> pa.Array:
    """``arr`` as Arrow type ``type_to_arrow(t)``, nested children matched by field id
    (embedded in the file when ``scope`` is None, else from those name-mapping entries)."""
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    if isinstance(t, UnknownType):  # the spec: a file's column for it is ignored
        return pa.nulls(len(arr))
    want = type_to_arrow(t)
    mask = arr.is_null() if arr.null_count else None
    if isinstance(t, StructType):
        if not pa.types.is_struct(arr.type):
            raise SchemaMismatchError(f"expected a struct, file has {arr.type}")
        kids = [arr.type.field(i) for i in range(arr.type.num_fields)]
        by_id = _ids(kids, scope)
        children = []
        for child in t.fields:
            i = by_id.get(child.field_id)
            if i is None:
                children.append(default_array(child, len(arr)))
            else:
                sub = _child_scope(kids[i], scope)
                children.append(conform_array(arr.field(i), child.field_type, sub))
        return pa.StructArray.from_arrays(children, fields=list(want), mask=mask)
    if isinstance(t, ListType):
        arr = _plain_list(arr)
        sub = _only_child_scope(arr.type.value_field, scope)
        values = conform_array(arr.values, t.element_type, sub)
        return pa.ListArray.from_arrays(arr.offsets, values, type=want, mask=mask)
    if isinstance(t, MapType):
        entries = arr.values
        key_field, item_field = arr.type.key_field, arr.type.item_field
        keys = conform_array(entries.field(0), t.key_type, _child_scope(key_field, scope))
        items = conform_array(entries.field(1), t.value_type, _child_scope(item_field, scope))
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=want, mask=mask)
    if arr.type != want:
        return arr.cast(want)
    return arr


def _only_child_scope(f: pa.Field, scope: Scope) -> Scope:
    """A list element's scope: the entry naming it, else the only entry there is."""
    if scope is None or find(scope, f.name) is not None or len(scope) != 1:
        return _child_scope(f, scope)
    return scope[0].fields


def _plain_list(arr: pa.Array) -> pa.Array:
    if pa.types.is_large_list(arr.type):
        return arr.cast(pa.list_(arr.type.value_field))
    if not pa.types.is_list(arr.type):
        raise SchemaMismatchError(f"expected a list, file has {arr.type}")
    return arr
