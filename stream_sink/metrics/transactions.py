"""What a sink holding source transactions reports: the transactions and rows it holds
now (gauges, from the hold after the last batch) and the transactions it forced out
by the hold's bound, committed incomplete (a counter: only grows).

``snapshot()`` returns a frozen copy, safe to hand to an exporter or ``status``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class TransactionMetricsSnapshot:
    held_transactions: int = 0
    """Source transactions held now (open, or complete but behind an open one on a key)."""
    held_rows: int = 0
    """Change rows held now."""
    oldest_held_batch: int | None = None
    """The batch that first saw the oldest held transaction."""
    forced_transactions: int = 0
    """Transactions committed incomplete because they were held past the bound."""
    completed_transactions: int = 0
    """Transactions committed complete."""


class TransactionMetrics:
    """Mutable, thread-safe holder of the metrics above."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = TransactionMetricsSnapshot()

    def held(self, transactions: int, rows: int, oldest_batch: int | None) -> None:
        with self._lock:
            self._now = TransactionMetricsSnapshot(
                transactions,
                rows,
                oldest_batch,
                self._now.forced_transactions,
                self._now.completed_transactions,
            )

    def committed(self, completed: int, forced: int) -> None:
        with self._lock:
            n = self._now
            self._now = TransactionMetricsSnapshot(
                n.held_transactions,
                n.held_rows,
                n.oldest_held_batch,
                n.forced_transactions + forced,
                n.completed_transactions + completed,
            )

    def snapshot(self) -> TransactionMetricsSnapshot:
        with self._lock:
            return self._now
