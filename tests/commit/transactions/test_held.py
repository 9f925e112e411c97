"""Tests stream_sink.commit.transactions.held: the hold's bytes round-trip exactly and
damaged bytes are refused as corrupt state."""

from __future__ import annotations

import pytest
from tx_streams import Event, end, rows

from stream_sink.commit.transactions.held import HeldTransactions, OpenTransaction
from stream_sink.exceptions import CorruptStateError


def test_the_hold_round_trips() -> None:
    hold = HeldTransactions(
        7,
        123,
        rows([Event(3, "t", "public.orders", 1), Event(1, None, "public.lines", 2)]),
        {"t": OpenTransaction("t", 5, 99, end("t", {"public.orders": 2}))},
        ("a", "b"),
    )
    back = HeldTransactions.from_bytes(hold.to_bytes(), where="here")
    assert back == HeldTransactions(7, 123, back.rows, hold.open, ("a", "b"))
    assert back.rows is not None and hold.rows is not None and back.rows.equals(hold.rows)
    assert back.row_count == 2


def test_an_empty_hold_has_no_rows() -> None:
    back = HeldTransactions.from_bytes(HeldTransactions().to_bytes(), where="here")
    assert back == HeldTransactions() and back.rows is None


@pytest.mark.parametrize("cut", [6, 12, -3])
def test_damaged_bytes_are_corrupt_state(cut: int) -> None:
    raw = HeldTransactions(1, 2, rows([Event(0, "t", "public.orders", 1)])).to_bytes()
    with pytest.raises(CorruptStateError, match="here"):
        HeldTransactions.from_bytes(raw[:cut], where="here")
