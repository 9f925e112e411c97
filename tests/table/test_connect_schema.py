"""Kafka Connect schemas of Debezium events (JsonConverter with schemas) as row schemas."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from stream_sink.exceptions import SchemaMismatchError, ValidationError
from stream_sink.table.connect_schema import (
    WIRE_ENCODINGS,
    WIRE_KEY,
    key_schema_of,
    merge_row_schemas,
    row_schema_of,
)


def envelope(*fields: dict, image: str = "after") -> dict:
    row = {"type": "struct", "fields": list(fields), "optional": True, "field": image}
    return {"type": "struct", "fields": [row, {"type": "string", "field": "op"}]}


PK = {"type": "int64", "optional": False, "field": "pk"}
V = {"type": "string", "optional": True, "field": "v"}


def test_row_schema_of_an_envelope_keeps_order_types_and_optionality() -> None:
    flag = {"type": "boolean", "optional": True, "field": "flag"}
    schema = row_schema_of(json.dumps(envelope(PK, V, flag)))
    assert schema == pa.schema(
        [pa.field("pk", pa.int64(), False), ("v", pa.string()), ("flag", pa.bool_())]
    )
    assert row_schema_of(envelope(PK, image="before")).names == ["pk"]  # a delete's


def test_unknown_types_and_envelopes_without_images_are_refused() -> None:
    with pytest.raises(ValidationError, match="Kafka Connect type 'map'"):
        row_schema_of(envelope(PK, {"type": "map", "field": "m"}))
    with pytest.raises(ValidationError, match=r"schemas\.enable=true"):
        row_schema_of({"type": "struct", "fields": [{"type": "string", "field": "op"}]})


def test_merge_adds_columns_of_later_events_and_refuses_type_changes() -> None:
    extra = {"type": "string", "optional": True, "field": "extra"}
    old, new = row_schema_of(envelope(PK, V)), row_schema_of(envelope(PK, V, extra))
    assert merge_row_schemas([old, new]).names == ["pk", "v", "extra"]
    changed = row_schema_of(envelope(PK, {"type": "int32", "optional": True, "field": "v"}))
    with pytest.raises(SchemaMismatchError, match="'v' is string"):
        merge_row_schemas([old, changed])


def logical(name: str, kind: str, field: str, **extra: object) -> dict:
    return {"type": kind, "optional": True, "name": name, "field": field, **extra}


def test_logical_types_give_the_source_types_and_say_how_their_json_encodes_them() -> None:
    """A PostgreSQL table as Debezium describes it (precise decimals, adaptive time
    precision): each column typed as the source has it, not as its JSON encoding."""
    decimal = logical(
        "org.apache.kafka.connect.data.Decimal",
        "bytes",
        "balance",
        parameters={"scale": "4", "connect.decimal.precision": "20"},
    )
    variable = logical(
        "io.debezium.data.VariableScaleDecimal",
        "struct",
        "n",
        fields=[{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}],
    )
    schema = row_schema_of(
        envelope(
            PK,
            decimal,
            variable,
            logical("io.debezium.time.Date", "int32", "d"),
            logical("io.debezium.time.MicroTime", "int64", "t"),
            logical("io.debezium.time.MicroTimestamp", "int64", "ts"),
            logical("io.debezium.time.Timestamp", "int64", "ts_ms"),
            logical("io.debezium.time.ZonedTimestamp", "string", "tz"),
            logical("io.debezium.data.Json", "string", "j"),
            logical("io.debezium.data.Uuid", "string", "u"),
            {"type": "float", "optional": True, "field": "r"},
            {"type": "double", "optional": True, "field": "dp"},
            {"type": "array", "optional": True, "items": {"type": "int32"}, "field": "tags"},
        )
    )
    types = {f.name: f.type for f in schema}
    assert types == {
        "pk": pa.int64(),
        "balance": pa.decimal128(20, 4),
        "n": pa.decimal128(38, 18),
        "d": pa.date32(),
        "t": pa.int64(),
        "ts": pa.timestamp("us"),
        "ts_ms": pa.timestamp("us"),
        "tz": pa.timestamp("us", "UTC"),
        "j": pa.string(),
        "u": pa.string(),
        "r": pa.float32(),
        "dp": pa.float64(),
        "tags": pa.list_(pa.int32()),
    }
    wires = {f.name: (f.metadata or {}).get(WIRE_KEY, b"").decode() for f in schema}
    assert wires == {
        "pk": "",
        "balance": "unscaled",
        "n": "variable-scale",
        "d": "days",
        "t": "time-micros",
        "ts": "micros",
        "ts_ms": "millis",
        "tz": "iso-instant",
        "j": "",
        "u": "",
        "r": "",
        "dp": "",
        "tags": "",
    }
    assert set(wires.values()) - {""} <= set(WIRE_ENCODINGS)


def test_decimals_the_formats_cannot_hold_are_refused_naming_the_column() -> None:
    wide = logical(
        "org.apache.kafka.connect.data.Decimal",
        "bytes",
        "big",
        parameters={"scale": "2", "connect.decimal.precision": "60"},
    )
    with pytest.raises(ValidationError, match=r"column 'big' .* decimal\(60, 2\)"):
        row_schema_of(envelope(PK, wide))
    bare = logical("org.apache.kafka.connect.data.Decimal", "bytes", "x")
    with pytest.raises(ValidationError, match="without a valid 'scale'"):
        row_schema_of(envelope(PK, bare))


def test_a_kafka_keys_schema_gives_the_key_columns() -> None:
    key = {"type": "struct", "name": "k.Key", "fields": [PK]}
    assert key_schema_of(json.dumps(key)) == pa.schema([pa.field("pk", pa.int64(), False)])
    with pytest.raises(ValidationError, match="not a struct of key columns"):
        key_schema_of({"type": "int64"})
