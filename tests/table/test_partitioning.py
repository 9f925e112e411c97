"""Partition specs: building as Java does, JSON, computing partition values, paths."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from stream_sink.exceptions import CorruptMetadataError, InvalidTransformError, ValidationError
from stream_sink.table.arrow import schema_to_arrow
from stream_sink.table.partitioning import (
    UNPARTITIONED_SPEC,
    PartitionField,
    PartitionSpec,
    build_partition_spec,
    java_url_encode,
)
from stream_sink.table.schema import Schema
from stream_sink.table.transforms import Bucket, Day, Identity, Truncate
from stream_sink.table.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)
from stream_sink.table.values import partition_tuples, to_internal

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "ts", TimestamptzType()),
    NestedField(3, "category", StringType()),
    NestedField(4, "name", StringType()),
    NestedField(5, "price", DecimalType(9, 2)),
    NestedField(6, "d", DateType()),
    NestedField(7, "tags", ListType(9, StringType())),
    NestedField(8, "loc", StructType(NestedField(10, "city", StringType()))),
    NestedField(11, "score", DoubleType()),
)

CONTRACT_SPEC = [
    ("day", "ts"),
    ("bucket", "id", 16),
    ("identity", "category"),
    ("truncate", "name", 4),
]


def test_build_contract_example_names_and_ids_as_java() -> None:
    spec = build_partition_spec(SCHEMA, CONTRACT_SPEC)
    assert spec.spec_id == 0
    assert spec.fields == (
        PartitionField(2, 1000, Day(), "ts_day"),
        PartitionField(1, 1001, Bucket(16), "id_bucket"),
        PartitionField(3, 1002, Identity(), "category"),
        PartitionField(4, 1003, Truncate(4), "name_trunc"),
    )
    assert spec.last_assigned_field_id == 1003
    assert not spec.is_unpartitioned


def test_default_names_for_every_transform() -> None:
    spec = build_partition_spec(
        Schema(NestedField(1, "ts", TimestampType()), NestedField(2, "x", IntegerType())),
        [("year", "ts"), ("void", "x"), ("identity", "x")],
        spec_id=3,
        start_field_id=1005,
    )
    assert [(f.name, f.field_id) for f in spec.fields] == [
        ("ts_year", 1005),
        ("x_null", 1006),
        ("x", 1007),
    ]
    assert spec.spec_id == 3
    months = build_partition_spec(SCHEMA, [("month", "ts")]).fields[0].name
    hours = build_partition_spec(SCHEMA, [("hour", "ts")]).fields[0].name
    assert (months, hours) == ("ts_month", "ts_hour")


def test_explicit_names_and_nested_source() -> None:
    spec = build_partition_spec(SCHEMA, [("bucket", "id", 8, "shard"), ("identity", "loc.city")])
    assert [(f.name, f.source_id) for f in spec.fields] == [("shard", 1), ("loc.city", 10)]


@pytest.mark.parametrize(
    ("spec_like", "error", "needle"),
    [
        ([("day", "nope")], ValidationError, "'nope'"),
        ([("bucket", "score", 4)], InvalidTransformError, "'score'"),
        ([("hour", "d")], InvalidTransformError, "'d'"),
        ([("identity", "tags")], InvalidTransformError, "'tags'"),
        ([("identity", "loc")], InvalidTransformError, "'loc'"),
        ([("zorder", "id")], InvalidTransformError, "zorder"),
        ([("bucket", "id")], InvalidTransformError, "integer"),
        ([("bucket", "id", 0)], InvalidTransformError, "positive"),
        ([("day", "ts"), ("hour", "ts")], ValidationError, "redundant"),
        ([("identity", "id"), ("identity", "id", "id")], ValidationError, "more than once"),
        ([("bucket", "id", 4, "name")], ValidationError, "'name'"),
        ([("identity", "id", "category")], ValidationError, "'category'"),
        ([("day", "ts", "")], ValidationError, "empty"),
    ],
)
def test_build_errors_name_the_problem(spec_like: list, error: type, needle: str) -> None:
    with pytest.raises(error, match=needle):
        build_partition_spec(SCHEMA, spec_like)


def test_bucket_and_day_on_one_column_are_not_redundant() -> None:
    spec = build_partition_spec(SCHEMA, [("bucket", "id", 4), ("bucket", "id", 8, "id_b8")])
    assert len(spec.fields) == 2


def test_unpartitioned() -> None:
    assert UNPARTITIONED_SPEC.is_unpartitioned and UNPARTITIONED_SPEC.spec_id == 0
    assert UNPARTITIONED_SPEC.last_assigned_field_id == 999
    assert UNPARTITIONED_SPEC.partition_type(SCHEMA) == StructType()
    assert build_partition_spec(SCHEMA, []).is_unpartitioned
    assert build_partition_spec(SCHEMA, [("void", "id")]).is_unpartitioned
    assert UNPARTITIONED_SPEC.partition_path(()) == ""


def test_partition_type_uses_partition_field_ids_and_result_types() -> None:
    spec = build_partition_spec(SCHEMA, CONTRACT_SPEC)
    assert spec.partition_type(SCHEMA) == StructType(
        NestedField(1000, "ts_day", DateType()),
        NestedField(1001, "id_bucket", IntegerType()),
        NestedField(1002, "category", StringType()),
        NestedField(1003, "name_trunc", StringType()),
    )


def test_json_round_trip_and_spec_example() -> None:
    spec = build_partition_spec(SCHEMA, CONTRACT_SPEC, spec_id=2)
    text = json.dumps(spec.to_json())
    back = PartitionSpec.from_json(json.loads(text))
    assert back == spec and back.spec_id == 2
    assert spec.to_json()["fields"][1] == {
        "name": "id_bucket",
        "transform": "bucket[16]",
        "source-id": 1,
        "field-id": 1001,
    }
    example = {
        "spec-id": 0,
        "fields": [
            {"source-id": 4, "field-id": 1000, "name": "ts_day", "transform": "day"},
            {"source-id": 1, "field-id": 1001, "name": "id_bucket", "transform": "bucket[16]"},
        ],
    }
    assert PartitionSpec.from_json(example).to_json() == example


def test_from_json_accepts_v1_field_list_without_ids() -> None:
    spec = PartitionSpec.from_json(
        [
            {"source-id": 2, "name": "ts_day", "transform": "day"},
            {"source-id": 1, "name": "i", "transform": "identity"},
        ]
    )
    assert [f.field_id for f in spec.fields] == [1000, 1001]


@pytest.mark.parametrize(
    "obj",
    [
        None,
        "day",
        {"spec-id": 0},
        {"spec-id": "x", "fields": []},
        {"spec-id": 0, "fields": [{"source-id": 1, "field-id": 1000, "name": "a"}]},
        {
            "spec-id": 0,
            "fields": [{"source-id": 1, "field-id": 1000, "name": "a", "transform": "nope"}],
        },
        {
            "spec-id": 0,
            "fields": [{"source-id": "1", "field-id": 1000, "name": "a", "transform": "day"}],
        },
        {"spec-id": 0, "fields": [7]},
        {
            "spec-id": 0,
            "fields": [
                {"source-id": 1, "field-id": 1000, "name": "a", "transform": "identity"},
                {"source-id": 2, "field-id": 1000, "name": "b", "transform": "identity"},
            ],
        },
    ],
)
def test_from_json_corrupt(obj: object) -> None:
    with pytest.raises(CorruptMetadataError):
        PartitionSpec.from_json(obj)


def test_from_json_with_schema_checks_sources() -> None:
    obj = {
        "spec-id": 0,
        "fields": [{"source-id": 99, "field-id": 1000, "name": "a", "transform": "identity"}],
    }
    with pytest.raises(ValidationError, match="99"):
        PartitionSpec.from_json(obj, SCHEMA)


def test_compatible_with_ignores_ids() -> None:
    a = build_partition_spec(SCHEMA, CONTRACT_SPEC, spec_id=0)
    b = build_partition_spec(SCHEMA, CONTRACT_SPEC, spec_id=4, start_field_id=1010)
    assert a != b and a.compatible_with(b)
    c = build_partition_spec(SCHEMA, [("day", "ts"), ("bucket", "id", 8)])
    assert not a.compatible_with(c)
    assert not c.compatible_with(
        build_partition_spec(SCHEMA, [("day", "ts"), ("bucket", "id", 16)])
    )


# --- computing partition values -----------------------------------------------


def _rows() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([34, 1, None], pa.int64()),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 2, 13, 5, tzinfo=dt.timezone.utc),
                    dt.datetime(1969, 12, 31, 23, 59, tzinfo=dt.timezone.utc),
                    None,
                ],
                pa.timestamp("us", "UTC"),
            ),
            "category": ["a b/c", "日本", None],
            "name": ["iceberg", "ic", None],
        }
    )


def test_compute_then_tuples_then_paths() -> None:
    spec = build_partition_spec(SCHEMA, CONTRACT_SPEC)
    arrays = spec.compute(_rows(), SCHEMA)
    assert [a.type for a in arrays] == [pa.int32(), pa.int32(), pa.string(), pa.string()]
    types = [f.field_type for f in spec.partition_type(SCHEMA).fields]
    tuples = partition_tuples(arrays, types)
    assert tuples == [(19724, 3, "a b/c", "iceb"), (-1, 4, "日本", "ic"), (None, None, None, None)]
    paths = [spec.partition_path(t) for t in tuples]
    assert paths == [
        "ts_day=2024-01-02/id_bucket=3/category=a+b%2Fc/name_trunc=iceb",
        "ts_day=1969-12-31/id_bucket=4/category=%E6%97%A5%E6%9C%AC/name_trunc=ic",
        "ts_day=null/id_bucket=null/category=null/name_trunc=null",
    ]


def test_compute_on_chunked_table_and_record_batch_agree() -> None:
    spec = build_partition_spec(SCHEMA, CONTRACT_SPEC)
    table = pa.concat_tables([_rows().slice(0, 1), _rows().slice(1)])
    batch = _rows().to_batches()[0]
    assert [a.to_pylist() for a in spec.compute(table)] == [
        a.to_pylist() for a in spec.compute(batch)
    ]


def test_compute_finds_columns_by_field_id_before_name() -> None:
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "other", LongType()))
    spec = build_partition_spec(schema, [("identity", "id")])
    arrow_schema = schema_to_arrow(schema)
    # columns renamed in the data but carrying their field ids
    renamed = pa.schema(
        [arrow_schema.field(1).with_name("id"), arrow_schema.field(0).with_name("x")]
    )
    table = pa.table([pa.array([7, 8]), pa.array([1, 2])], schema=renamed)
    assert spec.compute(table)[0].to_pylist() == [1, 2]


def test_compute_nested_source_respects_parent_nulls() -> None:
    spec = build_partition_spec(SCHEMA, [("identity", "loc.city")])
    loc = pa.array([{"city": "Oslo"}, None, {"city": None}], pa.struct([("city", pa.string())]))
    table = pa.table({"loc": loc})
    assert spec.compute(table, SCHEMA)[0].to_pylist() == ["Oslo", None, None]


def test_compute_missing_column_and_unbound_spec() -> None:
    spec = build_partition_spec(SCHEMA, CONTRACT_SPEC)
    with pytest.raises(ValidationError, match="'name'"):
        spec.compute(_rows().drop_columns(["name"]))
    unbound = PartitionSpec.from_json(spec.to_json())
    with pytest.raises(ValidationError, match="not bound"):
        unbound.compute(_rows())
    assert [a.to_pylist() for a in unbound.compute(_rows(), SCHEMA)] == [
        a.to_pylist() for a in spec.compute(_rows())
    ]


# --- partition paths -----------------------------------------------------------


def test_partition_path_human_forms_for_every_transform() -> None:
    schema = Schema(
        NestedField(1, "ts", TimestampType()),
        NestedField(2, "d", DateType()),
        NestedField(3, "price", DecimalType(9, 2)),
        NestedField(4, "b", BinaryType()),
        NestedField(5, "s", StringType()),
        NestedField(6, "ts2", TimestampType()),
    )
    spec = build_partition_spec(
        schema,
        [
            ("hour", "ts"),
            ("month", "ts2"),
            ("year", "d"),
            ("identity", "ts"),
            ("identity", "d"),
            ("identity", "price"),
            ("truncate", "price", 50),
            ("identity", "b"),
            ("void", "s"),
        ],
    )
    values = (
        473389,
        648,
        54,
        1704200700000001,
        19724,
        Decimal("-10.65"),
        Decimal("-11.00"),
        b"\x00\x01\x02\x03",
        None,
    )
    assert spec.partition_path(values) == (
        "ts_hour=2024-01-02-13/ts2_month=2024-01/d_year=2024/ts=2024-01-02T13%3A05%3A00.000001"
        "/d=2024-01-02/price=-10.65/price_trunc=-11.00/b=AAECAw%3D%3D/s_null=null"
    )


def test_partition_path_without_schema_for_source_independent_transforms() -> None:
    spec = PartitionSpec.from_json(
        {
            "spec-id": 1,
            "fields": [
                {"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"},
                {"source-id": 1, "field-id": 1001, "name": "id_bucket", "transform": "bucket[16]"},
            ],
        }
    )
    assert spec.partition_path((19724, 3)) == "ts_day=2024-01-02/id_bucket=3"
    ident = PartitionSpec(0, (PartitionField(3, 1000, Identity(), "category"),))
    with pytest.raises(ValidationError, match="not bound"):
        ident.partition_path(("x",))
    assert ident.partition_path(("x",), SCHEMA) == "category=x"


def test_partition_path_wrong_arity() -> None:
    spec = build_partition_spec(SCHEMA, CONTRACT_SPEC)
    with pytest.raises(ValidationError, match="4 fields"):
        spec.partition_path((1, 2))


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("abcXYZ019", "abcXYZ019"),
        ("a b", "a+b"),
        ("a/b", "a%2Fb"),
        (".-*_", ".-*_"),
        ("~!'()", "%7E%21%27%28%29"),
        ("=&?%+#", "%3D%26%3F%25%2B%23"),
        ("é", "%C3%A9"),
        ("😀", "%F0%9F%98%80"),
        ("", ""),
    ],
)
def test_java_url_encoding(text: str, encoded: str) -> None:
    assert java_url_encode(text) == encoded


def test_partition_names_are_escaped_too() -> None:
    schema = Schema(NestedField(1, "a b", StringType()))
    spec = build_partition_spec(schema, [("identity", "a b")])
    assert spec.partition_path(("x y",)) == "a+b=x+y"


# --- internal values -----------------------------------------------------------


def test_to_internal_forms() -> None:
    assert to_internal(pa.array([dt.date(1969, 12, 31), None]), DateType()) == [-1, None]
    ts = pa.array([dt.datetime(1970, 1, 1, 0, 0, 1)], pa.timestamp("ms"))
    assert to_internal(ts, TimestampType()) == [1_000_000]
    ns = pa.array([-1, None], pa.timestamp("ns"))
    assert to_internal(ns, TimestampType()) == [-1, None]
    dec = pa.array([Decimal("1.50")], pa.decimal128(9, 2))
    assert to_internal(dec, DecimalType(9, 2)) == [Decimal("1.50")]
    assert str(to_internal(dec, DecimalType(9, 3))[0]) == "1.500"
    assert to_internal(pa.array([b"\x01" * 16], pa.uuid()), UUIDType()) == [b"\x01" * 16]
    assert to_internal(
        pa.chunked_array([pa.array([1]), pa.array([None], pa.int64())]), LongType()
    ) == [1, None]
    assert to_internal(pa.array([19724], pa.int32()), DateType()) == [19724]


def test_partition_tuples_edge_cases() -> None:
    assert partition_tuples([], []) == []
    with pytest.raises(ValueError):
        partition_tuples([pa.array([1])], [])
