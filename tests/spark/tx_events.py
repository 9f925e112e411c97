"""Debezium events of source transactions across three tables, as Kafka key/value JSON
(test input for ``from_debezium(..., transactions=True)``), cut into micro-batches that
split transactions.

Transaction ``n`` writes key ``n`` of each table (customer ``n``, order ``n``, item
``s<n>``); every fourth also deletes the three rows of transaction ``n - 3`` (held rows
and deletes in one transaction). So a state that shows whole transactions only has the
same keys in all three tables: :func:`keys_by_table` is what a reader checks.
"""

from __future__ import annotations

import json
from typing import Any

TABLES: dict[str, str] = {
    "inv.customers": "id long, name string",
    "inv.orders": "order_id long, customer long, amount double",
    "shop.items": "sku string, qty int",
}
KEYS = {"inv.customers": "id", "inv.orders": "order_id", "shop.items": "sku"}
SOURCE_SCHEMA = "key string, value string"


def _row(table: str, n: int) -> dict[str, Any]:
    if table == "inv.customers":
        return {"id": n, "name": f"c{n}"}
    if table == "inv.orders":
        return {"order_id": n, "customer": n, "amount": n / 4}
    return {"sku": f"s{n}", "qty": n}


def _event(table: str, n: int, tx: str, lsn: int, op: str) -> dict[str, Any]:
    db, name = table.split(".")
    image = _row(table, n)
    value = {
        "op": op,
        "before": image if op == "d" else None,
        "after": None if op == "d" else image,
        "source": {"db": db, "table": name, "lsn": lsn},
        "transaction": {"id": tx, "total_order": 1, "data_collection_order": 1},
    }
    return {"key": json.dumps({KEYS[table]: image[KEYS[table]]}), "value": json.dumps(value)}


def end_event(tx: str, counts: dict[str, int]) -> dict[str, Any]:
    value = {
        "status": "END",
        "id": tx,
        "event_count": sum(counts.values()),
        "data_collections": [{"data_collection": c, "event_count": k} for c, k in counts.items()],
        "ts_ms": 1,
    }
    return {"key": json.dumps({"id": tx}), "value": json.dumps(value)}


def transactions(count: int) -> tuple[list[dict[str, Any]], dict[str, set[int]]]:
    """The events of ``count`` transactions in source order (each transaction's END
    right after its events) and each table's keys at the end, as transaction numbers."""
    out: list[dict[str, Any]] = []
    live: dict[str, set[int]] = {t: set() for t in TABLES}
    lsn = 0
    for n in range(count):
        tx = f"tx{n}"
        counts = dict.fromkeys(TABLES, 0)
        changes = [(t, n, "c") for t in TABLES]
        if n % 4 == 3:
            changes += [(t, n - 3, "d") for t in TABLES]
        for table, k, op in changes:
            lsn += 1
            out.append(_event(table, k, tx, lsn, op))
            counts[table] += 1
            (live[table].discard if op == "d" else live[table].add)(k)
        out.append(end_event(tx, counts))
    return out, live


def cut(events: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """Micro-batches of ``size`` events: a size that is no multiple of a transaction's
    event count cuts transactions."""
    return [events[i : i + size] for i in range(0, len(events), size)]


def keys_by_table(catalog: Any) -> dict[str, set[int]]:
    """Each table's keys as transaction numbers (``s7`` is 7), empty for a table not
    there yet."""
    out: dict[str, set[int]] = {}
    for name, key in KEYS.items():
        if not catalog.table_exists(name):
            out[name] = set()
            continue
        values = catalog.load_table(name).scan().to_arrow().column(key).to_pylist()
        out[name] = {int(str(v).lstrip("s")) for v in values}
    return out
