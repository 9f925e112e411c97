"""The demo's input: a Debezium-style change stream of an ``orders`` table, and the table
it must produce.

Invariants:
- Deterministic for a seed: the same events and the same expected rows every run.
- Events of one order are in LSN order; an order is created before it is updated or
  deleted, and nothing happens to it after its delete. ``expected`` is the state after
  applying every event in order (upsert semantics keyed by ``(order_id, created_at)``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

ROW_SCHEMA_DDL = (
    "order_id long, created_at timestamp, customer string, status string, amount double"
)
TABLE_SCHEMA = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("status", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
KEY = ("order_id", "created_at")
PARTITION_SPEC = [("day", "created_at"), ("bucket", "order_id", 4)]
STATUSES = ("new", "paid", "shipped", "delivered")
_START = datetime(2024, 5, 1, tzinfo=timezone.utc)
_DAYS = 7

Row = dict[str, Any]


@dataclass(frozen=True)
class ChangeStream:
    files: tuple[bytes, ...]
    """JSON-lines Debezium events, one file per element, in LSN order."""
    expected: tuple[Row, ...]
    """The final table rows, sorted by order id (``created_at`` as ISO text)."""
    events: int


def generate(events: int, files: int, seed: int = 7) -> ChangeStream:
    """``events`` change events split into ``files`` files of consecutive LSNs."""
    rng = random.Random(seed)
    live: dict[int, Row] = {}
    ids: list[int] = []
    lines: list[str] = []
    next_id = 1
    for lsn in range(1, events + 1):
        roll = rng.random()
        if not ids or roll < 0.45:
            row = _new_order(rng, next_id)
            next_id += 1
            live[row["order_id"]] = row
            ids.append(row["order_id"])
            lines.append(_event("c", lsn, None, row))
        elif roll < 0.9:
            before = live[rng.choice(ids)]
            after = _advance(rng, before)
            live[after["order_id"]] = after
            lines.append(_event("u", lsn, before, after))
        else:
            victim = ids.pop(rng.randrange(len(ids)))
            lines.append(_event("d", lsn, live.pop(victim), None))
    per_file = max(1, -(-len(lines) // files))
    chunks = [lines[i : i + per_file] for i in range(0, len(lines), per_file)]
    payloads = tuple("".join(chunk).encode() for chunk in chunks)
    expected = tuple(live[k] for k in sorted(live))
    return ChangeStream(payloads, expected, events)


def _new_order(rng: random.Random, order_id: int) -> Row:
    created = _START + timedelta(seconds=rng.randrange(_DAYS * 86_400))
    return {
        "order_id": order_id,
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "customer": f"customer-{rng.randrange(500):03d}",
        "status": STATUSES[0],
        "amount": round(rng.uniform(5, 500), 2),
    }


def _advance(rng: random.Random, row: Row) -> Row:
    step = STATUSES.index(row["status"]) + 1
    status = STATUSES[step] if step < len(STATUSES) else row["status"]
    amount = row["amount"] if rng.random() < 0.7 else round(rng.uniform(5, 500), 2)
    return {**row, "status": status, "amount": amount}


def _event(op: str, lsn: int, before: Row | None, after: Row | None) -> str:
    envelope = {
        "before": before,
        "after": after,
        "source": {"connector": "postgresql", "db": "shop", "table": "orders", "lsn": lsn},
        "op": op,
        "ts_ms": 1_714_521_600_000 + lsn,
    }
    return json.dumps(envelope, separators=(",", ":")) + "\n"


def table_rows(table: pa.Table) -> list[Row]:
    """Rows of the table as read back, in the form of ``ChangeStream.expected``."""
    out = []
    for r in table.select(list(TABLE_SCHEMA.names)).to_pylist():
        r["created_at"] = r["created_at"].astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append(r)
    return sorted(out, key=lambda r: r["order_id"])
