"""The shop's invariants (``shop_workload.violations``), on states built by hand: a whole
transaction keeps them; each way a micro-batch can cut one (its order without its lines,
its lines without their order, the stock taken but not the lines) breaks one of them."""

from __future__ import annotations

from shop_workload import SKUS, STOCK_PER_SKU, violations


def stock(**taken: int) -> list[dict[str, int]]:
    """The stock with ``taken[f"s{sku}"]`` units of some SKUs taken."""
    return [{"sku": s, "qty": STOCK_PER_SKU - taken.get(f"s{s}", 0)} for s in range(1, SKUS + 1)]


ORDER = {"order_id": 1, "customer": "c1", "total": 2 * 100 + 3 * 200}
LINES = [
    {"order_id": 1, "line_no": 1, "sku": 1, "qty": 2, "price": 100},
    {"order_id": 1, "line_no": 2, "sku": 2, "qty": 3, "price": 200},
]


def test_a_whole_transaction_keeps_every_invariant() -> None:
    assert violations([], [], stock()) == []
    assert violations([ORDER], LINES, stock(s1=2, s2=3)) == []


def test_an_order_without_its_lines_breaks_the_total() -> None:
    (found,) = violations([ORDER], [], stock())
    assert "total is not their lines' sum" in found and "(1, 800, 0)" in found


def test_lines_without_their_order_are_orphans() -> None:
    (found,) = violations([], LINES, stock(s1=2, s2=3))
    assert "lines of missing orders [1]" in found


def test_stock_taken_without_the_lines_breaks_the_sum() -> None:
    (found,) = violations([], [], stock(s1=2))
    assert found == f"stock plus lines hold {SKUS * STOCK_PER_SKU - 2}, not {SKUS * STOCK_PER_SKU}"


def test_half_of_the_lines_breaks_the_total_and_the_sum() -> None:
    found = violations([ORDER], LINES[:1], stock(s1=2, s2=3))
    assert len(found) == 2
