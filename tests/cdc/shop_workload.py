"""A shop in PostgreSQL whose every transaction changes three tables together, and the
checks a reader can make across them (issue #38: one source transaction, one state).

Tables ``orders (order_id, customer, total)``, ``lines (order_id, line_no, sku, qty,
price)`` and ``stock (sku, qty)``. :class:`ShopWorkload` is their only writer; each of
its transactions keeps these invariants, which :func:`violations` checks on any state
of the three tables:

- every line's order exists, and every order's ``total`` is the sum of its lines'
  ``qty * price`` (an order always has a line, so an order seen without its lines is
  caught too);
- ``sum(stock.qty) + sum(lines.qty)`` is :data:`STOCK_TOTAL`: what the lines hold was
  taken from the stock, and a deleted or shrunk line gives it back.

The first transaction (:meth:`ShopWorkload.setup`) fills the stock and places the first
order, so no committed state of all three tables predates the stock.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TABLES = ("orders", "lines", "stock")
"""The source tables, all in schema ``public``."""

DDL = (
    "CREATE TABLE stock (sku bigint PRIMARY KEY, qty bigint NOT NULL)",
    "CREATE TABLE orders (order_id bigint PRIMARY KEY, customer text NOT NULL, "
    "total bigint NOT NULL)",
    "CREATE TABLE lines (order_id bigint NOT NULL REFERENCES orders, line_no int NOT NULL, "
    "sku bigint NOT NULL REFERENCES stock, qty bigint NOT NULL, price bigint NOT NULL, "
    "PRIMARY KEY (order_id, line_no))",
)

ROW_SCHEMAS = {
    "public.orders": "order_id bigint, customer string, total bigint",
    "public.lines": "order_id bigint, line_no int, sku bigint, qty bigint, price bigint",
    "public.stock": "sku bigint, qty bigint",
}
"""``from_debezium(row_schema=...)`` for the three tables' topics."""

COLUMNS = {
    "orders": ("order_id", "customer", "total"),
    "lines": ("order_id", "line_no", "sku", "qty", "price"),
    "stock": ("sku", "qty"),
}
KEYS = {"orders": ("order_id",), "lines": ("order_id", "line_no"), "stock": ("sku",)}

SKUS = 12
STOCK_PER_SKU = 100_000
STOCK_TOTAL = SKUS * STOCK_PER_SKU

Rows = Sequence[Mapping[str, Any]]


def violations(orders: Rows, lines: Rows, stock: Rows) -> list[str]:
    """What is wrong with one state of the three tables (empty when every invariant of
    the module holds); each entry names the invariant and the rows that break it."""
    found: list[str] = []
    totals: dict[int, int] = {}
    for line in lines:
        totals[line["order_id"]] = totals.get(line["order_id"], 0) + line["qty"] * line["price"]
    order_ids = {o["order_id"] for o in orders}
    orphans = sorted(set(totals) - order_ids)
    if orphans:
        found.append(f"lines of missing orders {orphans[:5]} ({len(orphans)} orders)")
    wrong = sorted(
        (o["order_id"], o["total"], totals.get(o["order_id"], 0))
        for o in orders
        if o["total"] != totals.get(o["order_id"], 0)
    )
    if wrong:
        found.append(
            f"orders whose total is not their lines' sum (order, total, sum) {wrong[:5]} "
            f"({len(wrong)} orders)"
        )
    held = sum(s["qty"] for s in stock) + sum(line["qty"] for line in lines)
    if held != STOCK_TOTAL:
        found.append(f"stock plus lines hold {held}, not {STOCK_TOTAL}")
    return found


def as_tuples(table: str, rows: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """``rows`` of ``table`` as sorted tuples of its columns (for comparing readers)."""
    return sorted(tuple(r[c] for c in COLUMNS[table]) for r in rows)


def source_state(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """The three tables as PostgreSQL holds them now, as :func:`as_tuples` gives them."""
    import psycopg

    out = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for t in TABLES:
            cur = conn.execute(f"SELECT {', '.join(COLUMNS[t])} FROM {t}")
            out[t] = sorted(tuple(r) for r in cur.fetchall())
    return out


class Done(dict[str, int]):
    """Transactions done, by kind."""

    def add(self, kind: str) -> None:
        self[kind] = self.get(kind, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.values())


@dataclass
class Line:
    line_no: int
    sku: int
    qty: int
    price: int


@dataclass
class ShopWorkload:
    """Seeded transactions on the shop, one connection, one transaction at a time (so
    source LSN order is commit order). Its own view of the orders (``live``) is exact,
    since nothing else writes the tables. Mix: 75% new orders, 15% orders changed (a
    line's quantity, sometimes a line added), 10% orders deleted with their lines."""

    url: str
    seed: int
    live: dict[int, list[Line]] = field(default_factory=dict)
    next_order: int = 1
    done: Done = field(default_factory=Done)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def setup(self, conn: Any) -> None:
        """The first transaction: the stock, and the first order taken from it."""
        with conn.transaction():
            for sku in range(1, SKUS + 1):
                conn.execute("INSERT INTO stock VALUES (%s, %s)", (sku, STOCK_PER_SKU))
            self._new_order(conn)
        self.done.add("setup")

    def step(self, conn: Any) -> None:
        """One transaction over the three tables."""
        roll = self.rng.random()
        with conn.transaction():
            if roll < 0.75 or len(self.live) < 3:
                self._new_order(conn)
                kind = "new"
            elif roll < 0.9:
                self._change_order(conn, self.rng.choice(sorted(self.live)))
                kind = "changed"
            else:
                self._delete_order(conn, self.rng.choice(sorted(self.live)))
                kind = "deleted"
        self.done.add(kind)

    def _new_order(self, conn: Any) -> None:
        order_id, self.next_order = self.next_order, self.next_order + 1
        skus = self.rng.sample(range(1, SKUS + 1), self.rng.randint(1, 4))
        lines = [
            Line(i + 1, sku, self.rng.randint(1, 5), self.rng.randint(100, 999))
            for i, sku in enumerate(skus)
        ]
        conn.execute(
            "INSERT INTO orders VALUES (%s, %s, %s)",
            (order_id, f"c{self.rng.randrange(50)}", _total(lines)),
        )
        for line in lines:
            conn.execute(
                "INSERT INTO lines VALUES (%s, %s, %s, %s, %s)",
                (order_id, line.line_no, line.sku, line.qty, line.price),
            )
            _take(conn, line.sku, line.qty)
        self.live[order_id] = lines

    def _change_order(self, conn: Any, order_id: int) -> None:
        lines = self.live[order_id]
        line = self.rng.choice(lines)
        qty = self.rng.randint(1, 5)
        conn.execute(
            "UPDATE lines SET qty = %s WHERE order_id = %s AND line_no = %s",
            (qty, order_id, line.line_no),
        )
        _take(conn, line.sku, qty - line.qty)
        line.qty = qty
        if self.rng.random() < 0.5:
            added = Line(max(x.line_no for x in lines) + 1, self.rng.randint(1, SKUS), 1, 500)
            conn.execute(
                "INSERT INTO lines VALUES (%s, %s, %s, %s, %s)",
                (order_id, added.line_no, added.sku, added.qty, added.price),
            )
            _take(conn, added.sku, added.qty)
            lines.append(added)
        conn.execute("UPDATE orders SET total = %s WHERE order_id = %s", (_total(lines), order_id))

    def _delete_order(self, conn: Any, order_id: int) -> None:
        for line in self.live.pop(order_id):
            _take(conn, line.sku, -line.qty)
        conn.execute("DELETE FROM lines WHERE order_id = %s", (order_id,))
        conn.execute("DELETE FROM orders WHERE order_id = %s", (order_id,))

    def run(self, stop: threading.Event, seconds: float, rate: float) -> None:
        """:meth:`setup`, then about ``rate`` transactions a second for ``seconds`` (or
        until ``stop`` is set)."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            self.setup(conn)
            deadline = time.monotonic() + seconds
            while not stop.is_set() and time.monotonic() < deadline:
                self.step(conn)
                stop.wait(1 / rate)


def _total(lines: Iterable[Line]) -> int:
    return sum(line.qty * line.price for line in lines)


def _take(conn: Any, sku: int, qty: int) -> None:
    """Move ``qty`` units of ``sku`` from the stock into the lines (negative: back)."""
    conn.execute("UPDATE stock SET qty = qty - %s WHERE sku = %s", (qty, sku))
