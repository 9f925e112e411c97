"""A Debezium stream of three tables with different keys and schemas (test input), and
the rows each table must end with (the model)."""

from __future__ import annotations

import json
import random
from typing import Any

TABLES: dict[str, str] = {
    "inv.customers": "id long, name string",
    "inv.orders": "order_id long, customer long, amount double",
    "shop.items": "sku string, qty int",
}
KEYS = {"inv.customers": "id", "inv.orders": "order_id", "shop.items": "sku"}
SOURCE_SCHEMA = "key string, value string"


def _row(table: str, k: int, version: int) -> dict[str, Any]:
    if table == "inv.customers":
        return {"id": k, "name": f"c{k}-v{version}"}
    if table == "inv.orders":
        return {"order_id": k, "customer": k % 3, "amount": version + k / 4}
    return {"sku": f"s{k}", "qty": version}


Batches = list[list[dict[str, Any]]]


def events(files: int, per_file: int, seed: int = 5) -> tuple[Batches, dict[str, dict[Any, Any]]]:
    """``files`` batches of Debezium change events (as Kafka key/value JSON) and the
    final rows of each table by key."""
    rng = random.Random(seed)
    live: dict[str, dict[Any, dict[str, Any]]] = {t: {} for t in TABLES}
    batches: list[list[dict[str, Any]]] = []
    lsn = 0
    for _ in range(files):
        out = []
        for _ in range(per_file):
            lsn += 1
            table = rng.choice(list(TABLES))
            k = rng.randrange(6)
            after = _row(table, k, lsn)
            key = after[KEYS[table]]
            before = live[table].get(key)
            if before is not None and rng.random() < 0.25:
                op, image_after = "d", None
                del live[table][key]
            else:
                op, image_after = ("u" if before is not None else "c"), after
                live[table][key] = after
            db, name = table.split(".")
            value = {
                "op": op,
                "before": before,
                "after": image_after,
                "source": {"db": db, "table": name, "lsn": lsn},
            }
            out.append({"key": json.dumps({KEYS[table]: key}), "value": json.dumps(value)})
        batches.append(out)
    return batches, live
