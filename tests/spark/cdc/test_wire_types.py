"""Debezium's JSON encodings converted exactly to the row schema's types, or refused
naming the column, its type, the value and the event: plain strings of
``decimal.handling.mode=string`` taking a table's types (``types=``), values without
Connect schemas typed by ``row_schema``, and naive timestamps that do not move with the
session's time zone.

Tests stream_sink.spark.cdc.wire_types: Debezium's JSON values converted to the row schema's
types."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from stream_sink.spark import debezium_row_schema, from_debezium

STRING_FIELDS = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "bal"},  # decimal.handling.mode=string
    {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "d"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.NanoTimestamp", "field": "ns"},
]
TABLE = pa.schema([pa.field("id", pa.int64(), False), ("bal", pa.decimal128(20, 4))])


def events(spark: Any, *afters: dict[str, Any]) -> Any:
    envelope = {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": STRING_FIELDS, "optional": True, "field": "after"},
            {"type": "string", "field": "op"},
            {"type": "struct", "fields": [{"type": "int64", "field": "lsn"}], "field": "source"},
        ],
    }
    rows = [
        (json.dumps({"id": a["id"]}), json.dumps({"schema": envelope, "payload": {
            "op": "c", "after": a, "source": {"lsn": i}}}))
        for i, a in enumerate(afters)
    ]  # fmt: skip
    return spark.createDataFrame(rows, "key string, value string")


def test_plain_strings_take_the_tables_types_exactly(spark: Any) -> None:
    batch = events(
        spark,
        {"id": 1, "bal": "12345678901234.5600", "d": -1, "ns": 1_704_189_600_123_456_000},
        {"id": 2, "bal": "-0.0001", "d": None, "ns": None},
    )
    rows = debezium_row_schema(batch, types=TABLE)
    assert rows["bal"].dataType.simpleString() == "decimal(20,4)"
    assert debezium_row_schema(batch)["bal"].dataType.simpleString() == "string"
    got = [
        r.asDict()
        for r in from_debezium(batch, row_schema=rows).select("id", "bal", "d", "ns").collect()
    ]
    assert got == [
        {"id": 1, "bal": Decimal("12345678901234.5600"), "d": datetime.date(1969, 12, 31),
         "ns": datetime.datetime(2024, 1, 2, 10, 0, 0, 123456)},
        {"id": 2, "bal": Decimal("-0.0001"), "d": None, "ns": None},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("after", "refused"),
    [
        (
            {"id": 1, "bal": "1.23456"},
            "column 'bal' (decimal(20,4), from text-decimal): value 1.23456",
        ),
        ({"id": 2, "bal": "1e30"}, "value 1e30"),
        ({"id": 3, "bal": "twelve"}, "value twelve"),
        ({"id": 4, "ns": 1_704_189_600_123_456_789}, "column 'ns' (timestamp_ntz, from nanos)"),
    ],
    ids=["finer-than-the-scale", "wider-than-the-precision", "not-a-number", "nanoseconds"],
)
def test_a_value_that_does_not_convert_exactly_stops_naming_column_value_and_event(
    spark: Any, after: dict[str, Any], refused: str
) -> None:
    batch = events(spark, after)
    with pytest.raises(Exception, match="ValidationError") as e:
        from_debezium(batch, row_schema=debezium_row_schema(batch, types=TABLE)).collect()
    text = str(e.value)
    assert refused in text and "does not convert exactly; event:" in text
    assert f'"id": {after["id"]}' in text  # the event itself


def test_without_schemas_the_row_schema_types_what_the_json_holds(spark: Any) -> None:
    first = {"id": 1, "bal": 12.5, "d": "2024-02-29", "ts": 0, "tz": "2024-01-02T10:00:00+02:00"}
    second = {"id": 2, "bal": "7", "d": 19000, "ts": "2024-01-02 03:04:05.000006", "tz": 10**6}
    values = [{"op": "c", "after": first}, {"op": "c", "after": second}]
    batch = spark.createDataFrame(
        [(json.dumps(v | {"source": {"lsn": i}}),) for i, v in enumerate(values)], "value string"
    )
    ddl = "id bigint, bal decimal(10,2), d date, ts timestamp_ntz, tz timestamp"
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        got = from_debezium(batch, row_schema=ddl).select("id", "bal", "d", "ts", "tz")
        rows = [r.asDict() for r in got.orderBy("id").collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    utc = datetime.timezone.utc
    assert [(r["bal"], r["d"], r["ts"]) for r in rows] == [
        (Decimal("12.50"), datetime.date(2024, 2, 29), datetime.datetime(1970, 1, 1)),
        (Decimal("7.00"), datetime.date(2022, 1, 8), datetime.datetime(2024, 1, 2, 3, 4, 5, 6)),
    ]
    instants = [r["tz"].astimezone(utc) for r in rows]
    assert instants == [
        datetime.datetime(2024, 1, 2, 8, 0, tzinfo=utc),
        datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc),
    ]
