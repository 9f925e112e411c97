"""Commit retry policy from ``commit.retry.*`` table properties (Java's defaults).

Invariant: only CommitFailedError (a lost compare-and-swap) is retried;
CommitStateUnknownError and validation failures surface at once.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

from stream_sink.exceptions import CommitFailedError, InvalidOptionError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    num_retries: int = 4
    min_wait_ms: int = 100
    max_wait_ms: int = 60_000
    total_timeout_ms: int = 1_800_000

    @staticmethod
    def from_properties(props: Mapping[str, str]) -> RetryPolicy:
        def num(key: str, default: int) -> int:
            raw = props.get(key)
            if raw is None:
                return default
            try:
                value = int(raw)
            except ValueError:
                raise InvalidOptionError(
                    f"table property {key}={raw!r} is not an integer"
                ) from None
            if value < 0:
                raise InvalidOptionError(f"table property {key}={raw!r} must not be negative")
            return value

        return RetryPolicy(
            num("commit.retry.num-retries", 4),
            num("commit.retry.min-wait-ms", 100),
            num("commit.retry.max-wait-ms", 60_000),
            num("commit.retry.total-timeout-ms", 1_800_000),
        )

    def wait_ms(self, attempt: int) -> float:
        """Exponential backoff with jitter for the ``attempt``-th retry (1-based)."""
        base = min(self.min_wait_ms * (2 ** (attempt - 1)), self.max_wait_ms)
        return float(base) * (0.5 + random.random() / 2)

    def run(self, attempt_fn: Callable[[int], T], sleep: Callable[[float], None] = time.sleep) -> T:
        """Call ``attempt_fn(attempt)`` until it returns, retrying CommitFailedError."""
        start = time.monotonic()
        attempt = 0
        while True:
            try:
                return attempt_fn(attempt)
            except CommitFailedError:
                attempt += 1
                elapsed_ms = (time.monotonic() - start) * 1000
                if attempt > self.num_retries or elapsed_ms >= self.total_timeout_ms:
                    raise
                sleep(self.wait_ms(attempt) / 1000)
