"""Debezium change events as Kafka Connect's JsonConverter writes them with schemas
(``schemas.enable=true`` for keys and values), for the tests that read their row schema
from the events (``debezium_row_schema``): an ``orders`` table of PostgreSQL's
``shop`` schema with a ``numeric(10,2)`` amount and a ``date``, as Debezium encodes them
(``decimal.handling.mode=precise``: base64 unscaled bytes; dates as days).

``record`` gives one Kafka record as a JSON-lines row (``key``, ``value`` strings);
``tombstone`` the null-valued record Debezium writes after a delete.
"""

from __future__ import annotations

import base64
import datetime
import json
from decimal import Decimal
from typing import Any

KEY_FIELDS = [{"type": "int64", "optional": False, "field": "order_id"}]
ROW_FIELDS = [
    *KEY_FIELDS,
    {"type": "string", "optional": True, "field": "status"},
    {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "field": "amount",
    },
    {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "placed"},
]
KEY_SCHEMA = {"type": "struct", "fields": KEY_FIELDS, "optional": False, "name": "k.Key"}
SOURCE = {
    "type": "struct",
    "field": "source",
    "fields": [
        {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "string", "field": "db"},
        {"type": "string", "field": "schema"},
        {"type": "string", "field": "table"},
    ],
}
VALUE_SCHEMA = {
    "type": "struct",
    "name": "k.Envelope",
    "fields": [
        {"type": "struct", "fields": ROW_FIELDS, "optional": True, "field": "before"},
        {"type": "struct", "fields": ROW_FIELDS, "optional": True, "field": "after"},
        SOURCE,
        {"type": "string", "optional": False, "field": "op"},
    ],
}
EPOCH = datetime.date(1970, 1, 1)


def row(order_id: int, status: str, amount: str, placed: datetime.date) -> dict[str, Any]:
    """A row image as Debezium encodes it."""
    unscaled = int(Decimal(amount).scaleb(2))
    raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
    return {
        "order_id": order_id,
        "status": status,
        "amount": base64.b64encode(raw).decode(),
        "placed": (placed - EPOCH).days,
    }


def _key(order_id: int) -> str:
    return json.dumps({"schema": KEY_SCHEMA, "payload": {"order_id": order_id}})


def record(
    op: str, lsn: int, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> dict[str, Any]:
    """One change event's Kafka record (key and value with their schemas)."""
    image = after or before
    assert image is not None
    source = {"lsn": lsn, "db": "postgres", "schema": "shop", "table": "orders"}
    payload = {"op": op, "before": before, "after": after, "source": source}
    return {
        "key": _key(image["order_id"]),
        "value": json.dumps({"schema": VALUE_SCHEMA, "payload": payload}),
    }


def tombstone(order_id: int) -> dict[str, Any]:
    """The record Debezium writes after a delete so that compaction can drop the key."""
    return {"key": _key(order_id), "value": None}
