"""Reading Parquet data and delete files into a target schema, by field id.

Invariants:
- Columns are matched by ``PARQUET:field_id``, at every nesting level, never by
  name: a renamed column reads under its new name, a dropped-and-re-added name
  reads as nulls. Files without any field ids (imported files) fall back to
  matching by name.
- A target field the file lacks comes back as nulls, or as the file's partition
  value when the column is identity-partitioned (spec: identity partition values
  stand in for columns missing from a file).
- Results have exactly the Arrow type of ``schema_to_arrow`` for the target,
  widening promoted columns (int→long, float→double, decimal precision).
- A missing file raises MissingFileError naming the file, what it is, and the table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.exceptions import MissingFileError, SchemaMismatchError
from stream_sink.io.fileio import FileIO
from stream_sink.read.literals import to_arrow_array
from stream_sink.table.arrow import FIELD_ID_KEY, field_to_arrow, type_to_arrow
from stream_sink.table.types import IcebergType, ListType, MapType, NestedField, StructType


@contextmanager
def open_parquet(io: FileIO, location: str, what: str, table: str) -> Iterator[pq.ParquetFile]:
    """The Parquet file at ``location`` (``what``: "data file", "delete file")."""
    try:
        source = io.open_input(location)
    except MissingFileError as e:
        raise MissingFileError(f"{what} {location} of table {table} is missing") from e
    try:
        yield pq.ParquetFile(source, coerce_int96_timestamp_unit="us")
    finally:
        source.close()


class FileProjection:
    """How to read ``fields`` (top-level target fields) out of one file."""

    def __init__(self, file_schema: pa.Schema, fields: Sequence[NestedField]) -> None:
        self.fields = list(fields)
        by_id = _ids(file_schema)
        if by_id:
            found = {f.field_id: by_id.get(f.field_id) for f in self.fields}
        else:
            names = {f.name: i for i, f in enumerate(file_schema)}
            found = {f.field_id: names.get(f.name) for f in self.fields}
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
                name = self._file_schema.field(i).name
                out.append(_conform_chunked(raw.column(name), f.field_type))
            elif constants and f.field_id in constants and constants[f.field_id] is not None:
                value = to_arrow_array(f.field_type, [constants[f.field_id]])[0]
                out.append(pa.chunked_array([pa.repeat(value, n)], type_to_arrow(f.field_type)))
            else:
                out.append(pa.chunked_array([pa.nulls(n, type_to_arrow(f.field_type))]))
        return pa.Table.from_arrays(out, schema=self.target)


def _ids(schema: pa.Schema) -> dict[int, int]:
    out = {}
    for i, f in enumerate(schema):
        fid = _field_id(f)
        if fid is not None:
            out[fid] = i
    return out


def _field_id(f: pa.Field) -> int | None:
    raw = (f.metadata or {}).get(FIELD_ID_KEY)
    return int(raw) if raw is not None else None


def _conform_chunked(col: pa.ChunkedArray, t: IcebergType) -> pa.ChunkedArray:
    want = type_to_arrow(t)
    if col.type == want and not isinstance(t, (StructType, ListType, MapType)):
        return col
    return pa.chunked_array([conform_array(c, t) for c in col.chunks], want)


def conform_array(arr: pa.Array, t: IcebergType) -> pa.Array:
    """``arr`` as Arrow type ``type_to_arrow(t)``, nested children matched by field id."""
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    want = type_to_arrow(t)
    mask = arr.is_null() if arr.null_count else None
    if isinstance(t, StructType):
        if not pa.types.is_struct(arr.type):
            raise SchemaMismatchError(f"expected a struct, file has {arr.type}")
        by_id = {_field_id(arr.type.field(i)): i for i in range(arr.type.num_fields)}
        children = []
        for child in t.fields:
            i = by_id.get(child.field_id)
            if i is None:
                children.append(pa.nulls(len(arr), type_to_arrow(child.field_type)))
            else:
                children.append(conform_array(arr.field(i), child.field_type))
        return pa.StructArray.from_arrays(children, fields=list(want), mask=mask)
    if isinstance(t, ListType):
        arr = _plain_list(arr)
        values = conform_array(arr.values, t.element_type)
        return pa.ListArray.from_arrays(arr.offsets, values, type=want, mask=mask)
    if isinstance(t, MapType):
        entries = arr.values
        keys = conform_array(entries.field(0), t.key_type)
        items = conform_array(entries.field(1), t.value_type)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=want, mask=mask)
    if arr.type != want:
        return arr.cast(want)
    return arr


def _plain_list(arr: pa.Array) -> pa.Array:
    if pa.types.is_large_list(arr.type):
        return arr.cast(pa.list_(arr.type.value_field))
    if not pa.types.is_list(arr.type):
        raise SchemaMismatchError(f"expected a list, file has {arr.type}")
    return arr
