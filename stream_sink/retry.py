"""Retrying a call with jittered exponential backoff: the one retry loop of stream_sink.

Every place that retries (a Delta commit that lost its version, an Iceberg commit that
lost its compare-and-swap, a conditional PUT that met another in flight, a REST catalog
read, a credential renewal) describes its policy as a :class:`Backoff` and hands
:func:`retrying` the attempt and a predicate naming the errors worth another attempt.

Invariants:
- The wait before retry ``n`` (1-based) is ``min(first_s * 2 ** (n - 1), max_s)`` times
  a factor drawn uniformly from ``[jitter[0], jitter[1])``: writers that collide
  spread out instead of colliding again in step.
- At most ``max_attempts`` calls; no wait follows the last one. With ``deadline_s``, no
  attempt starts after a failure seen ``deadline_s`` or more after the first call began.
- An error the predicate refuses is raised at once, unchanged; the last retryable error
  is raised unchanged when the attempts or the deadline run out, so each caller says
  in its own words what ran out.
- The clock, the sleep and the random draw are parameters, so tests run without waiting.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """How often and how long to wait between attempts (see the module's invariants)."""

    first_s: float
    """The base wait before the first retry."""
    max_s: float
    """The base wait never grows past this."""
    max_attempts: int
    """Calls in all, the first included (at least 1)."""
    deadline_s: float | None = None
    """No retry once this long has passed since the first call began (None: no limit)."""
    jitter: tuple[float, float] = (0.5, 1.0)
    """The range of the factor each base wait is scaled by."""

    def wait_s(self, retry: int, draw: Callable[[], float] = random.random) -> float:
        """The wait before retry ``retry`` (1-based); ``draw`` returns a float in [0, 1)."""
        low, high = self.jitter
        base = min(self.first_s * 2 ** (retry - 1), self.max_s)
        return base * (low + (high - low) * draw())


OnRetry = Callable[[Exception, int, float], None]
"""Called before each wait with the error, the retry's number (1-based) and the wait (s)."""


def retrying(
    attempt: Callable[[int], T],
    backoff: Backoff,
    retryable: Callable[[Exception], bool],
    *,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    draw: Callable[[], float] = random.random,
) -> T:
    """Call ``attempt(0)``, ``attempt(1)``, … until one returns, and return its value.

    An attempt's exception that ``retryable`` refuses is raised at once; a retryable one
    is raised when it ends the last attempt or comes at or after the deadline, and is
    otherwise followed by ``on_retry`` and a wait of :meth:`Backoff.wait_s`."""
    start = clock()
    tries = max(1, backoff.max_attempts)
    retry = 0
    while True:
        try:
            return attempt(retry)
        except Exception as e:
            if not retryable(e):
                raise
            retry += 1
            late = backoff.deadline_s is not None and clock() - start >= backoff.deadline_s
            if retry >= tries or late:
                raise
            wait = backoff.wait_s(retry, draw)
            if on_retry is not None:
                on_retry(e, retry, wait)
            sleep(wait)


class TryAgain(Exception):
    """Raised by an attempt whose outcome asks for another (a lost race, a transient
    answer) rather than an error; ``seen`` carries what the attempt saw, for the caller
    to report when the attempts run out."""

    def __init__(self, cause: str, seen: object = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.seen = seen


def is_try_again(e: Exception) -> bool:
    """The predicate of loops whose only retryable outcome is :class:`TryAgain`."""
    return isinstance(e, TryAgain)
