"""docs/debezium.md's pipeline against the real parts: PostgreSQL's ``shop.orders``
captured by Debezium (schemas, precise decimals) into topic ``cdc.shop.orders`` with an
initial snapshot, an update, and a delete with its tombstone, before the page's code
runs; after it, the page's table must equal PostgreSQL's, typed as the source."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cdc_stack import Connect, Stack, peer_jars

import stream_sink as ss

TOPIC = "cdc.shop.orders"
EVENTS = 6
"""Messages Debezium writes for the statements below: three snapshot rows, an update,
a delete and its tombstone."""


def _sql(url: str, *statements: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows: list[tuple[Any, ...]] = []
        for s in statements:
            cur = conn.execute(s)
            rows = [tuple(r) for r in cur.fetchall()] if cur.description else rows
        return rows


def prepare(stack: Stack, directory: Path) -> dict[str, str]:
    """The topic filled by Debezium (stopped again once it has written every event), and
    the environment the page reads."""
    url = stack.postgres.url
    _sql(
        url,
        "CREATE SCHEMA shop",
        "CREATE TABLE shop.orders (order_id bigint PRIMARY KEY, status text, "
        "amount numeric(10,2), placed date)",
        "INSERT INTO shop.orders VALUES (1, 'new', 10.50, '2024-05-01'), "
        "(2, 'new', 20.00, '2024-05-02'), (3, 'new', -0.01, '1969-12-31')",
    )
    connect = Connect(
        directory,
        stack.kafka.jars,
        stack.kafka,
        stack.postgres,
        tables=r"shop\.orders",
        topic_prefix="cdc",
        name="docs",
        overrides={
            "decimal.handling.mode": "precise",
            "slot.name": "stream_sink_docs",
            "publication.name": "stream_sink_docs",
        },
    )
    connect.start()
    try:
        _sql(url, "UPDATE shop.orders SET status = 'paid' WHERE order_id = 1")
        _sql(url, "DELETE FROM shop.orders WHERE order_id = 2")
        _wait_for_events(stack)
    finally:
        connect.stop()
    return {
        "KAFKA_BOOTSTRAP_SERVERS": stack.kafka.bootstrap,
        "SPARK_KAFKA_JARS": ",".join(peer_jars("spark-kafka")),
    }


def _wait_for_events(stack: Stack, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        out = ""
        if TOPIC in stack.kafka.topics():
            out = stack.kafka.tool(
                "org.apache.kafka.tools.GetOffsetShell",
                "--bootstrap-server",
                stack.kafka.bootstrap,
                "--topic",
                TOPIC,
            )
        ends = [int(line.rsplit(":", 1)[1]) for line in out.split() if line.count(":") == 2]
        if sum(ends) >= EVENTS:
            return
        assert time.monotonic() < deadline, f"{TOPIC}: Debezium wrote {ends} of {EVENTS}"
        time.sleep(1)


def check(stack: Stack, sandbox: Path) -> None:
    """The page's table equals PostgreSQL's table (values and types)."""
    catalog = ss.load_catalog("local", type="hadoop", warehouse=str(sandbox / "warehouse"))
    rows = catalog.load_table("shop.orders").scan().to_arrow().to_pylist()
    got = sorted(tuple(r.values()) for r in rows)
    want = _sql(stack.postgres.url, "SELECT * FROM shop.orders ORDER BY order_id")
    assert got == want, f"the page's table {got} is not PostgreSQL's {want}"
