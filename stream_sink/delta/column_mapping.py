"""Column mapping (PROTOCOL.md "Column Mapping") and schema evolution on read.

A table's mode is ``delta.columnMapping.mode`` (``none``, ``name``, ``id``), honoured only
when the protocol has the ``columnMapping`` feature (reader version 2, or the feature).
Data files name columns by their physical names (``name``) or carry the column ids as
Parquet field ids (``id``); partition values and statistics are keyed by physical names.

Reading resolves every field of the table schema, nested ones included, in the file: by
display name (``none``), physical name (``name``) or field id (``id``). A field the file
lacks (a column added after the file was written, or dropped and re-added) reads as
null; a field whose type was widened (``typeWidening``) is cast to the table's type.
Invariant: the result has exactly the table schema's Arrow types and names.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.exceptions import SchemaMismatchError

from .actions import Protocol
from .features import COLUMN_MAPPING_MODE, reader_features
from .schema import FIELD_ID, ID, PHYSICAL_NAME, physical_schema, schema_fields

MODE = COLUMN_MAPPING_MODE
MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
MODES = ("none", "name", "id")


def mapping_mode(protocol: Protocol, configuration: Mapping[str, str]) -> str:
    """The column mapping mode in effect (``none`` unless the protocol supports it)."""
    if "columnMapping" not in reader_features(protocol):
        return "none"
    mode = configuration.get(MODE, "none").lower()
    if mode not in MODES:
        raise SchemaMismatchError(f"{MODE}={mode!r} is not one of {MODES}")
    return mode


@dataclass(frozen=True)
class ColumnMapping:
    """A table's schema string and mapping mode: what files are read and written by."""

    schema_string: str
    mode: str = "none"

    @cached_property
    def fields(self) -> list[dict[str, Any]]:
        return schema_fields(self.schema_string)

    @cached_property
    def _by_name(self) -> dict[str, dict[str, Any]]:
        return {f["name"]: f for f in self.fields}

    def physical_name(self, logical: str) -> str:
        """The name ``logical`` (a top-level column) has in files, stats and partitions."""
        if self.mode == "none":
            return logical
        f = self._by_name.get(logical)
        return logical if f is None else str((f.get("metadata") or {}).get(PHYSICAL_NAME, logical))

    def to_physical(self, data: pa.Table) -> pa.Table:
        """``data`` (in the table's logical schema) as it is written to a file."""
        if self.mode == "none":
            return data
        schema = physical_schema(self.schema_string)
        target = pa.schema([schema.field(self.physical_name(n)) for n in data.column_names])
        cols = [
            pa.chunked_array([c.view(f.type) for c in data.column(i).chunks], type=f.type)
            for i, f in enumerate(target)
        ]
        return pa.Table.from_arrays(cols, schema=target)

    def read(self, file_schema: pa.Schema, names: list[str]) -> dict[str, str | None]:
        """For each top-level logical column in ``names``: the file's column holding it
        (None: the file lacks it)."""
        return {n: _find(file_schema, self._by_name[n], self.mode) for n in names}

    def conform(
        self, column: pa.ChunkedArray | None, logical: str, target: pa.DataType, rows: int
    ) -> pa.ChunkedArray:
        """A file's column (None when absent) as the table's column ``logical``."""
        if column is None:
            return pa.chunked_array([pa.nulls(rows, target)], type=target)
        delta_type = self._by_name[logical]["type"]
        chunks = [_conform(c, delta_type, target, self.mode) for c in column.chunks]
        return pa.chunked_array(chunks, type=target)


def _find(file_fields: Any, field: Mapping[str, Any], mode: str) -> str | None:
    """The name of the file field (of a schema or struct type) that holds ``field``."""
    meta = field.get("metadata") or {}
    names = [f.name for f in file_fields]
    if mode == "id" and ID in meta:
        want = str(meta[ID]).encode()
        for f in file_fields:
            if (f.metadata or {}).get(FIELD_ID.encode()) == want:
                return str(f.name)
        return None
    name = meta.get(PHYSICAL_NAME, field["name"]) if mode != "none" else field["name"]
    return str(name) if name in names else None


def _conform(array: pa.Array, delta_type: Any, target: pa.DataType, mode: str) -> pa.Array:
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = []
        file_fields = [array.type.field(i) for i in range(array.type.num_fields)]
        for i, f in enumerate(delta_type["fields"]):
            name = _find(file_fields, f, mode)
            want = target.field(i).type
            if name is None:
                children.append(pa.nulls(len(array), want))
            else:
                child = array.field(array.type.get_field_index(name))
                children.append(_conform(child, f["type"], want, mode))
        mask = pc.is_null(array) if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target) and (
        pa.types.is_list(array.type) or pa.types.is_large_list(array.type)
    ):
        if pa.types.is_large_list(array.type):
            array = array.cast(pa.list_(array.type.value_field))
        values = _conform(array.values, delta_type["elementType"], target.value_type, mode)
        mask = pc.is_null(array) if array.null_count else None
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(array.type):
        keys = _conform(array.keys, delta_type["keyType"], target.key_type, mode)
        items = _conform(array.items, delta_type["valueType"], target.item_type, mode)
        mask = pc.is_null(array) if array.null_count else None
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=mask)
    if array.type == target:
        return array
    return array.cast(target)


def assign_physical(schema_string: str) -> tuple[str, int]:
    """``schema_string`` with a physical name (``col-<uuid>``) and an id on every struct
    field, nested ones included, as a new column-mapped table needs; also the largest
    id (``delta.columnMapping.maxColumnId``)."""
    doc = json.loads(schema_string)
    counter = [0]

    def visit(t: Any) -> None:
        if not isinstance(t, dict):
            return
        if t.get("type") == "struct":
            for f in t["fields"]:
                counter[0] += 1
                meta = f.setdefault("metadata", {})
                meta[ID] = counter[0]
                meta[PHYSICAL_NAME] = f"col-{uuid.uuid4()}"
                visit(f["type"])
        elif t.get("type") == "array":
            visit(t["elementType"])
        elif t.get("type") == "map":
            visit(t["keyType"])
            visit(t["valueType"])

    visit(doc)
    return json.dumps(doc, separators=(",", ":")), counter[0]
