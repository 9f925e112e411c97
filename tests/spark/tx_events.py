"""Debezium events of source transactions across three tables, as Kafka key/value JSON
(test input for ``from_debezium(..., transactions=True)``), cut into micro-batches that
split transactions.

Transaction ``n`` writes key ``n`` of each table (customer ``n``, order ``n``, item
``s<n>``); every fourth also deletes the three rows of transaction ``n - 3`` (held rows
and deletes in one transaction), and every fourth from the second updates those of
``n - 1`` (an update is one event that ``from_debezium`` makes two rows). Transaction ids
are as Debezium's PostgreSQL connector writes them: ``<xid>:<lsn>`` with each event's
own LSN. So a state that shows whole transactions only has the
same keys in all three tables: :func:`keys_by_table` is what a reader checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from many_tables import KEYS, SOURCE_SCHEMA, TABLES

__all__ = ["KEYS", "SOURCE_SCHEMA", "TABLES", "cut", "end_event", "keys_by_table", "transactions"]


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
        "before": image if op in ("d", "u") else None,
        "after": None if op == "d" else image,
        "source": {"db": db, "table": name, "lsn": lsn},
        "transaction": {"id": f"{tx}:{lsn}", "total_order": 1, "data_collection_order": 1},
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
        tx = str(700 + n)
        counts = dict.fromkeys(TABLES, 0)
        changes = [(t, n, "c") for t in TABLES]
        if n % 4 == 3:
            changes += [(t, n - 3, "d") for t in TABLES]
        if n % 4 == 1:
            changes += [(t, n - 1, "u") for t in TABLES]
        for table, k, op in changes:
            lsn += 1
            out.append(_event(table, k, tx, lsn, op))
            counts[table] += 1
            (live[table].discard if op == "d" else live[table].add)(k)
        lsn += 1
        out.append(end_event(f"{tx}:{lsn}", counts))
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


def sql_catalog_at(root: Path) -> Any:
    """The SQL catalog (SQLite) under ``root``: it commits a checkpoint's tables at once."""
    import stream_sink as ss

    return ss.load_catalog(
        "tx", type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=str(root / "wh")
    )
