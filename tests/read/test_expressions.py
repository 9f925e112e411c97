"""Row filters: building, parsing, binding to a schema, and the errors users see.

Tests stream_sink.read.filter_parser: the string form of row filters.
Tests stream_sink.read.literals: literals bound to a column's type."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from stream_sink.exceptions import ValidationError
from stream_sink.read import col, parse_filter
from stream_sink.read.binding import BoundPredicate, bind
from stream_sink.read.expressions import AlwaysTrue, And, Or, Predicate
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    DateType,
    DecimalType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), True),
    NestedField(2, "name", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "tz", TimestamptzType()),
    NestedField(5, "d", DateType()),
    NestedField(6, "amount", DecimalType(10, 2)),
    NestedField(7, "loc", StructType(NestedField(8, "city", StringType()))),
    NestedField(9, "tags", ListType(10, StringType())),
)


def _b(expr) -> object:
    return bind(expr if not isinstance(expr, str) else parse_filter(expr), SCHEMA, "table db.t")


def test_operators_build_predicates() -> None:
    assert (col("id") == 5) == Predicate("==", "id", (5,))
    assert (col("id") != 5).op == "!="
    assert ((col("id") < 5) & (col("id") >= 1)) == And(
        Predicate("<", "id", (5,)), Predicate(">=", "id", (1,))
    )
    assert isinstance((col("id") < 5) | col("name").is_null(), Or)
    with pytest.raises(TypeError, match="no truth value"):
        bool(col("id") == 5)
    with pytest.raises(TypeError, match="is_null"):
        _ = col("id") == None  # noqa: E711


def test_string_form_parses_to_the_same_bound_filter() -> None:
    text = (
        "id = 5 and (name is not null or ts >= '2024-01-01') and d in ('2024-01-02', '2024-01-03')"
    )
    expr = (
        (col("id") == 5)
        & (col("name").not_null() | (col("ts") >= dt.datetime(2024, 1, 1)))
        & col("d").isin([dt.date(2024, 1, 3), dt.date(2024, 1, 2)])
    )
    assert _b(text) == _b(expr)


def test_parser_accepts_sql_spellings() -> None:
    assert _b("NOT (id <> 3)") == _b(col("id") == 3)
    assert _b("name NOT IN ('a', 'it''s')") == _b(col("name").not_in(["a", "it's"]))
    assert _b('"loc.city" is null') == _b("loc.city IS NULL")
    assert isinstance(_b("true"), AlwaysTrue)


@pytest.mark.parametrize(
    "text", ["id = ", "id == == 3", "id = 3 and", "id in 3", "(id = 3", "id = null", "id ~ 3"]
)
def test_parse_errors_name_the_position(text: str) -> None:
    with pytest.raises(ValidationError, match="cannot parse filter"):
        parse_filter(text)


def test_literals_convert_to_internal_values() -> None:
    p = _b("ts >= '2024-01-01T00:00:01'")
    assert isinstance(p, BoundPredicate) and p.value == 1_704_067_201_000_000
    assert _b("tz < '1970-01-01T01:00:00+01:00'").value == 0
    assert _b("d = '1970-01-11'").value == 10
    assert _b(col("amount") > "12.50").value == Decimal("12.50")
    assert _b(col("loc.city") == "Oslo").field_id == 8


def test_negation_is_pushed_into_predicates() -> None:
    bound = _b(~((col("id") < 5) | col("name").is_null()))
    assert bound == And(
        BoundPredicate(">=", 1, ("id",), LongType(), (5,)),
        BoundPredicate("not_null", 2, ("name",), StringType()),
    )


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (col("nope") == 1, "unknown column 'nope'"),
        (col("name") == 5, "column 'name'"),
        (col("id") == "x", "column 'id'"),
        (col("ts") > "yesterday", "column 'ts'"),
        (col("loc") == 1, "nested type"),
        (col("tags.element") == "a", "inside a list"),
        (col("id") > float("nan"), "(?i)nan"),
    ],
)
def test_binding_errors_name_the_column_and_table(expr, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as err:
        _b(expr)
    assert "db.t" in str(err.value)
