"""Tests stream_sink.metrics.transactions: the held gauges follow the last hold, the
counters only grow; the report ``status`` reads round-trips."""

from __future__ import annotations

from pathlib import Path

from stream_sink.io import FileIO
from stream_sink.metrics.transactions import (
    TransactionMetrics,
    TransactionMetricsSnapshot,
    hold_report_location,
    read_hold_report,
    write_hold_report,
)


def test_gauges_and_counters() -> None:
    metrics = TransactionMetrics()
    assert metrics.snapshot() == TransactionMetricsSnapshot()
    metrics.held(2, 5, 3)
    metrics.committed(completed=4, forced=1)
    metrics.held(0, 0, None)
    metrics.committed(completed=1, forced=0)
    assert metrics.snapshot() == TransactionMetricsSnapshot(0, 0, None, 1, 5)


def test_the_hold_report_round_trips_and_an_unreadable_one_is_absent(tmp_path: Path) -> None:
    io = FileIO.for_location(str(tmp_path))
    where = hold_report_location(str(tmp_path / "chk"), "sink")
    assert where == f"{tmp_path}/chk/sink/transactions.json"
    assert read_hold_report(io, where) is None
    report = TransactionMetricsSnapshot(2, 7, 4, 1, 9)
    write_hold_report(io, where, report)
    assert read_hold_report(io, where) == report
    Path(where).write_text('{"held_transactions": 3, "surprise": "a newer field"}')
    assert read_hold_report(io, where) == TransactionMetricsSnapshot(3)
    Path(where).write_text('{"held_rows": "x"}')
    assert read_hold_report(io, where) is None
    Path(where).write_text("[1, 2]")
    assert read_hold_report(io, where) is None
