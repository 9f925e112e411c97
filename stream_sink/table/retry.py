"""Commit retry policy from ``commit.retry.*`` table properties (Java's defaults).

Invariant: only CommitFailedError (a lost compare-and-swap) is retried;
CommitStateUnknownError and validation failures surface at once. The loop and its
jittered backoff are :mod:`stream_sink.retry`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

from stream_sink.exceptions import CommitFailedError, InvalidOptionError
from stream_sink.retry import Backoff, retrying

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

    @property
    def backoff(self) -> Backoff:
        """The policy as waits: ``num_retries`` retries within ``total_timeout_ms``."""
        return Backoff(
            first_s=self.min_wait_ms / 1000,
            max_s=self.max_wait_ms / 1000,
            max_attempts=self.num_retries + 1,
            deadline_s=self.total_timeout_ms / 1000,
        )

    def run(self, attempt_fn: Callable[[int], T], sleep: Callable[[float], None] = time.sleep) -> T:
        """Call ``attempt_fn(attempt)`` until it returns, retrying CommitFailedError."""
        return retrying(
            attempt_fn, self.backoff, lambda e: isinstance(e, CommitFailedError), sleep=sleep
        )
