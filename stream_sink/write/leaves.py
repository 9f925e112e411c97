"""Reaching a primitive field's values inside (possibly nested) Arrow data.

Invariants:
- A path is the top-level column index followed by steps: a struct child index,
  ``"element"``, ``"key"`` or ``"value"``.
- :func:`leaf_values` yields only values that exist in the data: children of a null
  struct, and slots of null lists or maps, are not values (Arrow's ``flatten``
  merges the parent's validity, list/map ``flatten`` follows the offsets).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from stream_sink.table.schema import Schema
from stream_sink.table.types import IcebergType, ListType, MapType, StructType

Step = int | str
LeafPath = tuple[Step, ...]


def leaf_paths(schema: Schema) -> dict[int, LeafPath]:
    """The path of every primitive field id of ``schema``."""
    out: dict[int, LeafPath] = {}

    def visit(t: IcebergType, fid: int, path: LeafPath) -> None:
        if isinstance(t, StructType):
            for i, f in enumerate(t.fields):
                visit(f.field_type, f.field_id, (*path, i))
        elif isinstance(t, ListType):
            visit(t.element_type, t.element_id, (*path, "element"))
        elif isinstance(t, MapType):
            visit(t.key_type, t.key_id, (*path, "key"))
            visit(t.value_type, t.value_id, (*path, "value"))
        else:
            out[fid] = path

    for i, f in enumerate(schema.fields):
        visit(f.field_type, f.field_id, (i,))
    return out


def leaf_values(data: pa.Table | pa.RecordBatch, path: LeafPath) -> Iterator[pa.Array]:
    """The values of the leaf at ``path``, one array per chunk of ``data``."""
    column = data.column(int(path[0]))
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        yield _descend(chunk, path[1:])


def _descend(arr: pa.Array, steps: LeafPath) -> pa.Array:
    for step in steps:
        if step == "element":
            arr = arr.flatten()
        elif step == "key":
            arr = arr.keys
        elif step == "value":
            arr = arr.items
        else:
            assert isinstance(step, int)
            arr = arr.flatten()[step]
    return arr
