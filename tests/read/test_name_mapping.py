"""Files without field ids are read through the table's name mapping, at every nesting
level; columns the mapping leaves out read as their default or null; defaults parse
per type. (Tables written by real writers: tests/interop/test_iceberg_conformance.py.)"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from stream_sink.exceptions import CorruptMetadataError, SchemaMismatchError, UnsupportedError
from stream_sink.read.file_projection import FileProjection
from stream_sink.table.arrow import conform_to_schema
from stream_sink.table.defaults import default_array, parse_default
from stream_sink.table.name_mapping import (
    MappedField,
    NameMapping,
    mapping_of,
    parse_name_mapping,
    updated_mapping,
)
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
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
    UUIDType,
    field_from_json,
    field_to_json,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "name", StringType()),
    NestedField(
        3,
        "profile",
        StructType(NestedField(4, "email", StringType()), NestedField(5, "ok", BooleanType())),
    ),
    NestedField(6, "tags", ListType(7, StringType())),
    NestedField(8, "attrs", MapType(9, StringType(), 10, LongType())),
)
FILE = pa.table(
    {
        "id": pa.array([1, 2], pa.int64()),
        "name": ["a", "b"],
        "profile": [{"email": "a@x", "ok": True}, {"email": None, "ok": False}],
        "tags": [["t1"], []],
        "attrs": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
    }
)


def read(mapping: NameMapping | None, fields: tuple[NestedField, ...] = SCHEMA.fields) -> Any:
    projection = FileProjection(FILE.schema, fields, mapping, location="f.parquet", by_name=False)
    return projection.conform(FILE.select(projection.columns)).to_pylist()


def test_a_full_mapping_reads_every_column_at_every_level() -> None:
    assert read(mapping_of(SCHEMA)) == [
        {
            "id": 1,
            "name": "a",
            "profile": {"email": "a@x", "ok": True},
            "tags": ["t1"],
            "attrs": [("k", 1)],
        },
        {"id": 2, "name": "b", "profile": {"email": None, "ok": False}, "tags": [], "attrs": []},
    ]


def test_the_mapping_not_the_name_decides_and_left_out_columns_read_as_null() -> None:
    mapping = parse_name_mapping(
        json.dumps(
            [
                {"names": ["id"], "field-id": 1},
                {"names": ["name"], "field-id": 99},  # a column the table no longer has
                {"names": ["profile"], "field-id": 3, "fields": [{"names": [], "field-id": 4}]},
            ]
        ),
        "t",
    )
    rows = read(mapping)
    assert [r["name"] for r in rows] == [None, None]
    assert [r["profile"] for r in rows] == [{"email": None, "ok": None}] * 2
    assert [r["tags"] for r in rows] == [None, None]


def test_a_renamed_column_reads_through_its_old_name() -> None:
    renamed = (NestedField(1, "key", LongType()), NestedField(2, "label", StringType()))
    assert read(mapping_of(SCHEMA), renamed) == [{"key": 1, "label": "a"}, {"key": 2, "label": "b"}]


def test_a_file_without_ids_in_a_table_without_mapping_is_refused_naming_the_fix() -> None:
    with pytest.raises(SchemaMismatchError, match=r"f\.parquet has no field ids") as e:
        read(None)
    assert "schema.name-mapping.default" in str(e.value)


def test_a_malformed_mapping_is_corrupt_metadata_naming_the_property() -> None:
    with pytest.raises(CorruptMetadataError, match=r"schema\.name-mapping\.default"):
        parse_name_mapping('{"names": ["id"]}', "table t")


def test_schema_changes_keep_old_names_and_map_new_columns() -> None:
    old = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
    new = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "label", StringType()),
        NestedField(3, "name", StringType()),
    )
    got = updated_mapping(mapping_of(old), old, new)
    assert got == NameMapping(
        (
            MappedField(("id",), 1),
            MappedField(("label",), 2),  # "name" now belongs to the new column 3
            MappedField(("name",), 3),
        )
    )


def field(t: IcebergType, default: Any, fid: int = 1) -> NestedField:
    return NestedField(fid, "c", t, initial_default=json.dumps(default))


@pytest.mark.parametrize(
    ("t", "text", "value"),
    [
        (BooleanType(), True, True),
        (IntegerType(), 34, 34),
        (DoubleType(), 1.5, 1.5),
        (DecimalType(9, 2), "14.20", Decimal("14.20")),
        (DateType(), "2017-11-16", dt.date(2017, 11, 16)),
        (TimeType(), "22:31:08.123456", dt.time(22, 31, 8, 123456)),
        (
            TimestampType(),
            "2017-11-16T22:31:08.123456",
            dt.datetime(2017, 11, 16, 22, 31, 8, 123456),
        ),
        (
            TimestamptzType(),
            "2017-11-16T22:31:08.123456+01:00",
            dt.datetime(2017, 11, 16, 21, 31, 8, 123456, tzinfo=dt.timezone.utc),
        ),
        (StringType(), "iceberg", "iceberg"),
        (
            UUIDType(),
            "f79c3e09-677c-4bbd-a479-3f349cb785e7",
            uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes,
        ),
        (BinaryType(), "0000ff", b"\x00\x00\xff"),
        (FixedType(2), "00ff", b"\x00\xff"),
    ],
)
def test_defaults_parse_per_type_and_fill_missing_rows(
    t: IcebergType, text: Any, value: Any
) -> None:
    f = field(t, text)
    assert parse_default(f, f.initial_default or "") == value
    assert default_array(f, 2).to_pylist() == [value, value]


def test_a_struct_default_gives_present_structs_with_their_childrens_defaults() -> None:
    t = StructType(
        NestedField(2, "x", IntegerType(), initial_default="7"), NestedField(3, "y", StringType())
    )
    assert default_array(NestedField(1, "s", t, initial_default="{}"), 1).to_pylist() == [
        {"x": 7, "y": None}
    ]
    assert default_array(NestedField(1, "s", t), 1).to_pylist() == [None]


def test_defaults_survive_the_metadata_round_trip() -> None:
    f = field(DecimalType(9, 2), "1.50")
    assert field_from_json(json.loads(json.dumps(field_to_json(f)))) == f
    assert field_to_json(f)["initial-default"] == "1.50"


def test_bad_defaults_are_refused_naming_the_field() -> None:
    with pytest.raises(CorruptMetadataError, match=r"field 'c' .*not a date"):
        parse_default(field(DateType(), 5), "5")
    with pytest.raises(UnsupportedError, match="list"):
        parse_default(field(ListType(2, IntegerType()), [1]), "[1]")


def test_writers_fill_columns_the_data_lacks_with_their_write_default() -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "n", IntegerType(), required=True, write_default="5"),
        NestedField(3, "s", StringType(), initial_default='"old"', write_default='"new"'),
    )
    out = conform_to_schema(pa.table({"id": [1]}), schema, "t")
    assert out.to_pylist() == [{"id": 1, "n": 5, "s": "new"}]
