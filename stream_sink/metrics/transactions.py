"""What a sink holding source transactions reports: the transactions and rows it holds
now (gauges, from the hold after the last batch) and the transactions it forced out
by the hold's bound, committed incomplete (a counter: only grows).

``snapshot()`` returns a frozen copy, safe to hand to an exporter or ``status``; a sink
writes it after each batch to ``<checkpoint location>/<sink id>/transactions.json``
(:func:`write_hold_report`), which ``stream-sink status`` reads.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict, dataclass, fields

from stream_sink.io import FileIO
from stream_sink.metrics.maintenance_report import read_report_doc

log = logging.getLogger(__name__)


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


HOLD_REPORT_FILE = "transactions.json"


def hold_report_location(checkpoint_location: str, sink_id: str) -> str:
    """``<checkpoint location>/<sink id>/transactions.json`` (``sink_id`` the sink's own,
    not a routed table's ``<sink id>=<table>``)."""
    return f"{checkpoint_location.rstrip('/')}/{sink_id}/{HOLD_REPORT_FILE}"


def write_hold_report(io: FileIO, location: str, metrics: TransactionMetricsSnapshot) -> None:
    """Replace the report at ``location`` atomically (a reader sees a whole one)."""
    io.write_atomic(location, json.dumps(asdict(metrics)).encode("utf-8"), fsync=False)


def read_hold_report(io: FileIO, location: str) -> TransactionMetricsSnapshot | None:
    """The last report at ``location``; None when there is none or it cannot be read
    (logged: a report is what ``status`` shows, never a reason to fail)."""
    doc = read_report_doc(io, location)
    if doc is None:
        return None
    known = {f.name for f in fields(TransactionMetricsSnapshot)}
    values = {k: v for k, v in doc.items() if k in known}
    if not all(
        isinstance(v, int) or (v is None and k == "oldest_held_batch") for k, v in values.items()
    ):
        log.warning("held transactions report %s unreadable: %s", location, values)
        return None
    return TransactionMetricsSnapshot(**values)
