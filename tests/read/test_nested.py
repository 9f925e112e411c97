"""Nested columns (struct, list, map) read by field id, across schema changes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from read_support import assert_same_as_duckdb, hadoop_catalog

from stream_sink.read import col
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

V1 = Schema(
    NestedField(1, "id", LongType(), True),
    NestedField(
        2,
        "loc",
        StructType(NestedField(3, "city", StringType()), NestedField(4, "zip", IntegerType())),
    ),
    NestedField(5, "tags", ListType(6, StringType())),
    NestedField(7, "attrs", MapType(8, StringType(), 9, IntegerType())),
)
# zip renamed to postcode and widened to long, a new struct child, a list of structs
V2 = Schema(
    NestedField(1, "id", LongType(), True),
    NestedField(
        2,
        "loc",
        StructType(
            NestedField(4, "postcode", LongType()),
            NestedField(3, "city", StringType()),
            NestedField(10, "country", StringType()),
        ),
    ),
    NestedField(5, "tags", ListType(6, StringType())),
    NestedField(7, "attrs", MapType(8, StringType(), 9, IntegerType())),
)


def _v1_rows() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "loc": pa.array(
                [{"city": "Oslo", "zip": 150}, None, {"city": "Bergen", "zip": None}],
                pa.struct([("city", pa.string()), ("zip", pa.int32())]),
            ),
            "tags": pa.array([["a", "b"], [], None], pa.list_(pa.string())),
            "attrs": pa.array(
                [[("x", 1)], None, [("y", 2), ("z", 3)]], pa.map_(pa.string(), pa.int32())
            ),
        }
    )


def test_nested_columns_survive_rename_reorder_and_new_children(tmp_path: Path) -> None:
    table = hadoop_catalog(tmp_path).create_table("db.n", schema=V1)
    table.append(_v1_rows())
    table.catalog.commit(table.identifier, table.metadata_location, table.metadata.with_schema(V2))
    table.refresh()
    table.append(
        pa.table(
            {
                "id": pa.array([4], pa.int64()),
                "loc": pa.array(
                    [{"postcode": 9000, "city": "Tromso", "country": "NO"}],
                    pa.struct(
                        [("postcode", pa.int64()), ("city", pa.string()), ("country", pa.string())]
                    ),
                ),
                "tags": pa.array([["n"]], pa.list_(pa.string())),
                "attrs": pa.array([[("k", 9)]], pa.map_(pa.string(), pa.int32())),
            }
        )
    )
    out = table.scan().to_arrow()
    rows = {r["id"]: r for r in out.to_pylist()}
    assert rows[1]["loc"] == {"postcode": 150, "city": "Oslo", "country": None}
    assert rows[2]["loc"] is None and rows[2]["tags"] == [] and rows[2]["attrs"] is None
    assert rows[3]["loc"] == {"postcode": None, "city": "Bergen", "country": None}
    assert rows[3]["attrs"] == [("y", 2), ("z", 3)]
    assert rows[4]["loc"] == {"postcode": 9000, "city": "Tromso", "country": "NO"}
    assert out.schema.field("loc").type.field("postcode").type == pa.int64()
    old = table.scan(snapshot_id=table.snapshots()[0].snapshot_id).to_arrow()
    assert old.schema.field("loc").type.names == ["city", "zip"]
    filtered = table.scan(row_filter=col("loc.city") == "Oslo", columns=["id"]).to_arrow()
    assert filtered.to_pylist() == [{"id": 1}]
    assert table.scan(row_filter="loc.postcode > 1000", columns=["id"]).count() == 1
    assert_same_as_duckdb(table, "id")
