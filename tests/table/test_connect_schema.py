"""Kafka Connect schemas of Debezium events (JsonConverter with schemas) as row schemas."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from stream_sink.exceptions import SchemaMismatchError, ValidationError
from stream_sink.table.connect_schema import merge_row_schemas, row_schema_of


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
