"""stream_sink/retry.py: the one retry loop, on an injected clock, sleep and draw (no test
waits), and the commit retry policy (stream_sink/table/retry.py) built on it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stream_sink.exceptions import CommitFailedError, CommitStateUnknownError
from stream_sink.retry import Backoff, OnRetry, TryAgain, is_try_again, retrying
from stream_sink.table.retry import RetryPolicy


class FakeTime:
    """A clock that only the sleeps (and ``advance``) move."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(
    times: int, error: Exception, value: str = "done"
) -> tuple[list[int], Callable[[int], str]]:
    """An attempt that raises ``error`` ``times`` times, then returns ``value``; and the
    attempt numbers it was called with."""
    seen: list[int] = []

    def attempt(n: int) -> str:
        seen.append(n)
        if len(seen) <= times:
            raise error
        return value

    return seen, attempt


def run(
    attempt: Callable[[int], str], backoff: Backoff, t: FakeTime, on_retry: OnRetry | None = None
) -> str:
    return retrying(
        attempt,
        backoff,
        is_try_again,
        on_retry=on_retry,
        sleep=t.sleep,
        clock=t.clock,
        draw=lambda: 0.5,
    )


def test_the_first_success_is_returned_and_attempts_are_numbered_from_zero() -> None:
    t = FakeTime()
    seen, attempt = failing(2, TryAgain("busy"))
    assert run(attempt, Backoff(0.1, 10.0, max_attempts=5), t) == "done"
    assert seen == [0, 1, 2]
    assert len(t.sleeps) == 2


def test_waits_double_from_the_first_up_to_the_cap() -> None:
    t = FakeTime()
    seen, attempt = failing(5, TryAgain("busy"))
    run(attempt, Backoff(0.1, 0.5, max_attempts=6, jitter=(1.0, 1.0)), t)
    assert seen == [0, 1, 2, 3, 4, 5]
    assert t.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])


@pytest.mark.parametrize("jitter", [(0.5, 1.0), (0.5, 1.5)])
def test_jitter_scales_each_wait_within_its_range(jitter: tuple[float, float]) -> None:
    b = Backoff(0.2, 4.0, max_attempts=4, jitter=jitter)
    low, high = jitter
    for retry, base in [(1, 0.2), (2, 0.4), (3, 0.8), (6, 4.0)]:
        assert b.wait_s(retry, draw=lambda: 0.0) == pytest.approx(base * low)
        assert b.wait_s(retry, draw=lambda: 0.999999) == pytest.approx(base * high)
        assert base * low <= b.wait_s(retry) < base * high


def test_an_error_the_predicate_refuses_is_raised_at_once_without_a_wait() -> None:
    t = FakeTime()
    refused = ValueError("not retryable")
    seen, attempt = failing(1, refused)
    with pytest.raises(ValueError) as raised:
        run(attempt, Backoff(0.1, 1.0, max_attempts=5), t)
    assert raised.value is refused
    assert seen == [0] and t.sleeps == []


def test_the_last_retryable_error_is_raised_unchanged_with_no_wait_after_it() -> None:
    t = FakeTime()
    errors = [TryAgain(f"busy {i}") for i in range(4)]

    def attempt(n: int) -> str:
        raise errors[n]

    with pytest.raises(TryAgain) as raised:
        run(attempt, Backoff(0.1, 1.0, max_attempts=4), t)
    assert raised.value is errors[3]
    assert len(t.sleeps) == 3  # between the 4 attempts only


def test_one_attempt_when_max_attempts_is_below_one() -> None:
    t = FakeTime()
    seen, attempt = failing(1, TryAgain("busy"))
    with pytest.raises(TryAgain):
        run(attempt, Backoff(0.1, 1.0, max_attempts=0), t)
    assert seen == [0] and t.sleeps == []


def test_no_attempt_starts_after_a_failure_at_the_deadline() -> None:
    t = FakeTime()
    seen: list[int] = []

    def slow(n: int) -> str:
        seen.append(n)
        t.now += 4.0  # each attempt takes 4 s
        raise TryAgain("busy")

    with pytest.raises(TryAgain):
        run(slow, Backoff(0.5, 0.5, max_attempts=100, deadline_s=10.0, jitter=(1.0, 1.0)), t)
    # failures at 4, 8.5, 13 s after the start: the third is past the deadline
    assert seen == [0, 1, 2]
    assert t.sleeps == [0.5, 0.5]


def test_a_zero_deadline_allows_the_first_attempt_only() -> None:
    t = FakeTime()
    seen, attempt = failing(1, TryAgain("busy"))
    with pytest.raises(TryAgain):
        run(attempt, Backoff(0.1, 1.0, max_attempts=5, deadline_s=0.0), t)
    assert seen == [0]


def test_on_retry_sees_each_error_its_number_and_the_wait_that_follows() -> None:
    t = FakeTime()
    calls: list[tuple[str, int, float]] = []
    seen, attempt = failing(2, TryAgain("busy"))
    run(
        attempt,
        Backoff(0.1, 1.0, max_attempts=3),
        t,
        on_retry=lambda e, n, wait: calls.append((str(e), n, wait)),
    )
    assert seen == [0, 1, 2]
    assert [(e, n) for e, n, _ in calls] == [("busy", 1), ("busy", 2)]
    assert [w for _, _, w in calls] == t.sleeps


def test_try_again_carries_what_the_attempt_saw() -> None:
    e = TryAgain("503", seen={"status": 503})
    assert e.cause == "503" and e.seen == {"status": 503} and str(e) == "503"
    assert is_try_again(e) and not is_try_again(ValueError())


# --- the commit retry policy (commit.retry.* table properties) ----------------------------


def test_the_commit_policy_retries_only_a_lost_race_num_retries_times() -> None:
    policy = RetryPolicy.from_properties({"commit.retry.num-retries": "2"})
    sleeps: list[float] = []
    seen, attempt = failing(10, CommitFailedError("lost the race"))
    with pytest.raises(CommitFailedError):
        policy.run(attempt, sleep=sleeps.append)
    assert seen == [0, 1, 2] and len(sleeps) == 2
    assert 0.05 <= sleeps[0] < 0.1 and 0.1 <= sleeps[1] < 0.2

    unknown = CommitStateUnknownError("no answer")
    seen, attempt = failing(1, unknown)
    with pytest.raises(CommitStateUnknownError):
        policy.run(attempt, sleep=sleeps.append)
    assert seen == [0]


def test_the_commit_policy_waits_as_its_properties_say() -> None:
    props = {
        "commit.retry.num-retries": "7",
        "commit.retry.min-wait-ms": "50",
        "commit.retry.max-wait-ms": "300",
        "commit.retry.total-timeout-ms": "2000",
    }
    b = RetryPolicy.from_properties(props).backoff
    assert (b.max_attempts, b.deadline_s, b.jitter) == (8, 2.0, (0.5, 1.0))
    assert [b.wait_s(n, draw=lambda: 1.0) for n in (1, 2, 3, 4)] == pytest.approx(
        [0.05, 0.1, 0.2, 0.3]
    )
