"""Tests stream_sink.commit.transactions.bound: the options are checked, the bound counts
batches and milliseconds from the batch that first saw a transaction, and a forced-out
transaction's WARNING says what was missing."""

from __future__ import annotations

import logging

import pytest

from stream_sink.commit.transactions.bound import (
    DEFAULT_HOLD_BATCHES,
    ForcedTransaction,
    HoldBound,
    warn_forced,
)
from stream_sink.commit.transactions.held import OpenTransaction
from stream_sink.exceptions import InvalidOptionError


@pytest.mark.parametrize(
    ("batches", "ms"), [(None, None), (0, None), (None, -1), (True, None), ("3", None)]
)
def test_bad_options_are_refused(batches: object, ms: object) -> None:
    with pytest.raises(InvalidOptionError, match="transaction_hold"):
        HoldBound(batches, ms)  # type: ignore[arg-type]


def test_batches_and_milliseconds() -> None:
    tx = OpenTransaction("t", first_batch=4, first_ms=1000)
    assert HoldBound().batches == DEFAULT_HOLD_BATCHES
    assert not HoldBound(batches=3).exceeded(tx, 6, 0)
    assert HoldBound(batches=3).exceeded(tx, 7, 0)
    assert not HoldBound(batches=None, ms=500).exceeded(tx, 100, 1499)
    assert HoldBound(batches=100, ms=500).exceeded(tx, 5, 1500)


def test_the_warning_names_the_transaction_and_what_is_missing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        warn_forced("s", ForcedTransaction("571:9", 2, {"public.orders": 1}, None), 12)
        warn_forced(
            "s", ForcedTransaction("572:9", 2, {"public.orders": 1}, {"public.orders": 2}), 12
        )
    first, second = caplog.records
    assert "571:9" in first.getMessage() and "END event never arrived" in first.getMessage()
    assert "its END counts {'public.orders': 2}" in second.getMessage()
