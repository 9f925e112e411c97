"""Sort orders: JSON per the spec, defaults, validation."""

from __future__ import annotations

import json

import pytest

from stream_sink.exceptions import CorruptMetadataError, InvalidTransformError, ValidationError
from stream_sink.table.schema import Schema
from stream_sink.table.sorting import (
    UNSORTED_SORT_ORDER,
    NullOrder,
    SortDirection,
    SortField,
    SortOrder,
    build_sort_order,
)
from stream_sink.table.transforms import Bucket, Day, Hour, Identity
from stream_sink.table.types import DoubleType, LongType, NestedField, StringType, TimestampType

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "name", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "score", DoubleType()),
)

SPEC_EXAMPLE = {
    "order-id": 1,
    "fields": [
        {"transform": "identity", "source-id": 2, "direction": "asc", "null-order": "nulls-first"},
        {"transform": "bucket[4]", "source-id": 3, "direction": "desc", "null-order": "nulls-last"},
    ],
}


def test_spec_example_round_trip() -> None:
    order = SortOrder.from_json(SPEC_EXAMPLE)
    assert order.fields == (
        SortField(2, Identity(), SortDirection.ASC, NullOrder.NULLS_FIRST),
        SortField(3, Bucket(4), SortDirection.DESC, NullOrder.NULLS_LAST),
    )
    assert order.to_json() == SPEC_EXAMPLE
    assert SortOrder.from_json(json.loads(json.dumps(order.to_json()))) == order


def test_unsorted_order() -> None:
    assert UNSORTED_SORT_ORDER.order_id == 0 and UNSORTED_SORT_ORDER.is_unsorted
    assert UNSORTED_SORT_ORDER.to_json() == {"order-id": 0, "fields": []}
    assert SortOrder.from_json({"order-id": 0, "fields": []}) == UNSORTED_SORT_ORDER


def test_order_id_rules() -> None:
    with pytest.raises(ValidationError, match="reserved"):
        SortOrder(0, (SortField(1, Identity()),))
    with pytest.raises(ValidationError, match="no fields"):
        SortOrder(2, ())


@pytest.mark.parametrize(
    "obj",
    [
        None,
        {"fields": []},
        {"order-id": 1},
        {
            "order-id": 1,
            "fields": [
                {
                    "transform": "identity",
                    "source-id": 1,
                    "direction": "up",
                    "null-order": "nulls-last",
                }
            ],
        },
        {
            "order-id": 1,
            "fields": [
                {"transform": "identity", "source-id": 1, "direction": "asc", "null-order": "last"}
            ],
        },
        {
            "order-id": 1,
            "fields": [
                {
                    "transform": "nope",
                    "source-id": 1,
                    "direction": "asc",
                    "null-order": "nulls-last",
                }
            ],
        },
        {
            "order-id": 1,
            "fields": [{"transform": "identity", "direction": "asc", "null-order": "nulls-last"}],
        },
        {"order-id": 1, "fields": []},
        {
            "order-id": 0,
            "fields": [
                {
                    "transform": "identity",
                    "source-id": 1,
                    "direction": "asc",
                    "null-order": "nulls-last",
                }
            ],
        },
    ],
)
def test_corrupt_json(obj: object) -> None:
    with pytest.raises(CorruptMetadataError):
        SortOrder.from_json(obj)


def test_build_with_java_default_null_orders() -> None:
    order = build_sort_order(SCHEMA, ["id", ("ts", "desc"), ("name", "asc", "nulls-last")])
    assert order.order_id == 1
    assert [(f.source_id, f.direction, f.null_order) for f in order.fields] == [
        (1, SortDirection.ASC, NullOrder.NULLS_FIRST),
        (3, SortDirection.DESC, NullOrder.NULLS_LAST),
        (2, SortDirection.ASC, NullOrder.NULLS_LAST),
    ]
    assert build_sort_order(SCHEMA, None) == UNSORTED_SORT_ORDER
    assert build_sort_order(SCHEMA, []) == UNSORTED_SORT_ORDER


def test_build_errors() -> None:
    with pytest.raises(ValidationError, match="'nope'"):
        build_sort_order(SCHEMA, ["nope"])
    with pytest.raises(ValidationError, match="'id'"):
        build_sort_order(SCHEMA, [("id", "sideways")])
    with pytest.raises(InvalidTransformError, match="'score'"):
        build_sort_order(SCHEMA, SortOrder(1, (SortField(4, Bucket(2)),)))


def test_satisfies() -> None:
    by_hour = SortOrder(1, (SortField(3, Hour()), SortField(1, Identity())))
    by_day = SortOrder(2, (SortField(3, Day()),))
    assert by_hour.satisfies(by_day) and not by_day.satisfies(by_hour)
    desc = SortOrder(3, (SortField(3, Hour(), SortDirection.DESC, NullOrder.NULLS_LAST),))
    assert not desc.satisfies(by_day)
    assert by_day.satisfies(UNSORTED_SORT_ORDER)
