"""Types, schemas and their Arrow form as users meet them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from stream_sink.exceptions import CorruptMetadataError, SchemaMismatchError, ValidationError
from stream_sink.table.arrow import (
    FIELD_ID_KEY,
    conform_to_schema,
    schema_from_arrow,
    schema_to_arrow,
)
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    DecimalType,
    DoubleType,
    FixedType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
    type_from_json,
    type_to_json,
)


def nested_schema() -> Schema:
    return Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(
            3,
            "location",
            StructType(NestedField(4, "lat", DoubleType()), NestedField(5, "lon", DoubleType())),
        ),
        NestedField(6, "tags", ListType(7, StringType(), element_required=False)),
        NestedField(8, "props", MapType(9, StringType(), 10, IntegerType(), value_required=True)),
        NestedField(11, "price", DecimalType(9, 2)),
        NestedField(12, "ts", TimestamptzType()),
        NestedField(13, "digest", FixedType(16)),
        identifier_field_ids=[1],
    )


def test_schema_json_round_trip_keeps_ids_and_identifier_fields() -> None:
    s = nested_schema()
    back = Schema.from_json(s.to_json())
    assert back == s
    assert back.identifier_field_names == ["id"]
    assert back.find_column_name(4) == "location.lat"
    assert back.highest_field_id == 13


def test_type_strings_follow_the_spec() -> None:
    assert type_to_json(DecimalType(9, 2)) == "decimal(9, 2)"
    assert type_from_json("decimal(9,2)") == DecimalType(9, 2)
    assert type_from_json("fixed[16]") == FixedType(16)
    with pytest.raises(CorruptMetadataError, match="unknown primitive type 'varchar'"):
        type_from_json("varchar")


def test_duplicate_field_ids_are_refused() -> None:
    with pytest.raises(ValidationError, match="duplicate field id 1"):
        Schema(NestedField(1, "a", LongType()), NestedField(1, "b", LongType()))


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (NestedField(1, "id", LongType(), required=False), "must be required"),
        (NestedField(1, "id", DoubleType(), required=True), "other than float/double"),
    ],
)
def test_bad_identifier_fields_are_refused(field: NestedField, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Schema(field, identifier_field_ids=[1])


def test_identifier_field_inside_a_list_is_refused() -> None:
    with pytest.raises(ValidationError, match="inside a list or map"):
        Schema(NestedField(1, "l", ListType(2, LongType(), True)), identifier_field_ids=[2])


def test_arrow_schema_carries_field_ids_and_round_trips() -> None:
    s = nested_schema()
    arrow = schema_to_arrow(s)
    assert arrow.field("id").metadata[FIELD_ID_KEY] == b"1"
    assert not arrow.field("id").nullable
    assert arrow.field("ts").type == pa.timestamp("us", tz="UTC")
    back = schema_from_arrow(arrow)
    assert back.fields == s.fields


def test_fresh_ids_are_assigned_top_level_first() -> None:
    arrow = pa.schema(
        [("a", pa.int64()), ("s", pa.struct([("x", pa.int32())])), ("b", pa.string())]
    )
    s = schema_from_arrow(arrow, identifier_fields=["a"])
    assert [f.field_id for f in s.fields] == [1, 2, 3]
    assert s.find_field("s.x").field_id == 4
    assert s.find_field("a").required
    assert s.identifier_field_names == ["a"]


def test_conform_widens_reorders_and_fills_optional_columns() -> None:
    s = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(3, "score", DoubleType()),
    )
    data = pa.table({"score": pa.array([1.5], pa.float32()), "id": pa.array([7], pa.int32())})
    out = conform_to_schema(data, s, "db.t")
    assert out.column_names == ["id", "name", "score"]
    assert out.schema == schema_to_arrow(s)
    assert out.to_pylist() == [{"id": 7, "name": None, "score": 1.5}]


def test_conform_names_every_offending_column() -> None:
    s = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "n", IntegerType()))
    with pytest.raises(SchemaMismatchError) as e:
        conform_to_schema(pa.table({"n": pa.array(["x"]), "extra": [1]}), s, "db.t")
    text = str(e.value)
    assert "db.t" in text
    assert "'extra' is not in the table" in text
    assert "required column 'id' is missing" in text
    assert "'n' has type string in the data but int in the table" in text


def test_null_in_required_column_names_the_row() -> None:
    s = Schema(NestedField(1, "id", LongType(), required=True))
    with pytest.raises(SchemaMismatchError, match="required column 'id' has a null at row 2"):
        conform_to_schema(pa.table({"id": [1, 2, None]}), s, "db.t")


def test_narrowing_is_refused() -> None:
    s = Schema(NestedField(1, "id", IntegerType(), required=True))
    with pytest.raises(SchemaMismatchError, match="type long in the data but int"):
        conform_to_schema(pa.table({"id": pa.array([1], pa.int64())}), s, "db.t")
