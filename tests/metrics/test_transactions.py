"""Tests stream_sink.metrics.transactions: the held gauges follow the last hold, the
counters only grow."""

from __future__ import annotations

from stream_sink.metrics.transactions import TransactionMetrics, TransactionMetricsSnapshot


def test_gauges_and_counters() -> None:
    metrics = TransactionMetrics()
    assert metrics.snapshot() == TransactionMetricsSnapshot()
    metrics.held(2, 5, 3)
    metrics.committed(completed=4, forced=1)
    metrics.held(0, 0, None)
    metrics.committed(completed=1, forced=0)
    assert metrics.snapshot() == TransactionMetricsSnapshot(0, 0, None, 1, 5)
