"""How long a source transaction may be held: ``transaction_hold_batches`` micro-batches
and/or ``transaction_hold_ms`` milliseconds after the batch that first saw it.

A transaction past its bound is *forced out*: committed as it is (the events seen so
far), loudly: a WARNING names it and what is missing, and a counter counts it. The
bound exists so that a lost END (the transaction topic not subscribed, a filtered
collection, a connector restart that never re-sends it) cannot hold rows forever.

Invariant: the decision depends only on the batch id and the time the hold was
decided at, which a replayed batch reuses (:class:`~.store.HoldStore`), so a batch
re-run after a crash splits exactly as its first run did.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from stream_sink.exceptions import InvalidOptionError

from .held import OpenTransaction

log = logging.getLogger(__name__)

DEFAULT_HOLD_BATCHES = 10


@dataclass(frozen=True)
class HoldBound:
    """The bound; None switches a limit off (at least one must be set)."""

    batches: int | None = DEFAULT_HOLD_BATCHES
    ms: int | None = None

    def __post_init__(self) -> None:
        if self.batches is None and self.ms is None:
            raise InvalidOptionError(
                "set transaction_hold_batches or transaction_hold_ms: an unbounded hold "
                "would keep a transaction whose END never comes forever"
            )
        for name, value in (
            ("transaction_hold_batches", self.batches),
            ("transaction_hold_ms", self.ms),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise InvalidOptionError(f"{name} must be a positive integer, got {value!r}")

    def exceeded(self, tx: OpenTransaction, batch_id: int, now_ms: int) -> bool:
        """True when ``tx``, still open after ``batch_id`` at ``now_ms``, is past the bound:
        held for ``batches`` batches after the one that first saw it, or ``ms``."""
        if self.batches is not None and batch_id - tx.first_batch >= self.batches:
            return True
        return self.ms is not None and now_ms - tx.first_ms >= self.ms


@dataclass(frozen=True)
class ForcedTransaction:
    """A transaction committed incomplete: its events seen per collection and what its
    END says it has (None: no END seen)."""

    id: str
    first_batch: int
    seen: Mapping[str, int]
    expected: Mapping[str, int] | None


def warn_forced(sink: str, forced: ForcedTransaction, batch_id: int) -> None:
    """The WARNING of a forced-out transaction, naming what was missing."""
    missing = "its END event never arrived (is the <topic.prefix>.transaction topic subscribed?)"
    if forced.expected is not None:
        missing = f"its END counts {dict(forced.expected)}"
    log.warning(
        "sink %s: source transaction %s held since batch %d is committed incomplete with "
        "batch %d (the hold's bound): %s events seen per collection, %s",
        sink,
        forced.id,
        forced.first_batch,
        batch_id,
        dict(forced.seen),
        missing,
    )
