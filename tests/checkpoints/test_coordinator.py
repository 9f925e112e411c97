"""When the coordinator calls for a checkpoint: by batch count, by time, or forced.

Tests stream_sink.checkpoints.coordinator: when a checkpoint is due."""

from __future__ import annotations

import pytest

from stream_sink.checkpoints import CheckpointConfig, CheckpointCoordinator
from stream_sink.exceptions import InvalidOptionError


def test_default_checkpoints_after_every_batch() -> None:
    c = CheckpointCoordinator()
    assert [c.on_batch(b, now_ms=1000 + b) for b in range(3)] == [True, True, True]
    assert c.last_checkpoint_id == 2
    assert c.last_checkpoint_batch_ids == (2,)


def test_every_third_batch_checkpoints_with_the_last_batch_id() -> None:
    c = CheckpointCoordinator(CheckpointConfig(interval_batches=3))
    decisions = {b: c.on_batch(b, now_ms=0) for b in range(10, 17)}
    assert [b for b, due in decisions.items() if due] == [12, 15]
    assert c.last_checkpoint_batch_ids == (13, 14, 15)
    assert c.pending_batch_ids == (16,)


def test_time_interval_checkpoints_once_enough_time_has_passed() -> None:
    c = CheckpointCoordinator(CheckpointConfig(interval_batches=None, interval_ms=5000), start_ms=0)
    assert not c.on_batch(0, now_ms=1000)
    assert not c.on_batch(1, now_ms=4999)
    assert c.on_batch(2, now_ms=5000)
    assert c.last_checkpoint_batch_ids == (0, 1, 2)
    assert not c.on_batch(3, now_ms=9000)  # the clock restarts at the checkpoint
    assert c.on_batch(4, now_ms=10_000)


def test_batches_or_time_whichever_comes_first() -> None:
    c = CheckpointCoordinator(CheckpointConfig(interval_batches=4, interval_ms=100), start_ms=0)
    assert [c.on_batch(b, now_ms=b * 10) for b in range(4)] == [False, False, False, True]
    assert not c.on_batch(4, now_ms=50)
    assert c.on_batch(5, now_ms=200)
    assert c.last_checkpoint_batch_ids == (4, 5)


def test_is_due_lets_a_timer_notice_an_overdue_checkpoint() -> None:
    c = CheckpointCoordinator(CheckpointConfig(interval_batches=100, interval_ms=1000), start_ms=0)
    assert not c.is_due(5000)  # nothing pending
    c.on_batch(7, now_ms=10)
    assert not c.is_due(999)
    assert c.is_due(1000)
    assert c.force(now_ms=1000) == 7
    assert not c.is_due(10_000)


def test_forced_checkpoint_at_stop_covers_pending_batches() -> None:
    c = CheckpointCoordinator(CheckpointConfig(interval_batches=10))
    assert c.force() is None  # nothing to checkpoint
    for b in (3, 4, 5):
        assert not c.on_batch(b, now_ms=0)
    assert c.force() == 5
    assert c.last_checkpoint_batch_ids == (3, 4, 5)
    assert c.force() is None


def test_replayed_batch_is_not_counted_twice() -> None:
    c = CheckpointCoordinator(CheckpointConfig(interval_batches=2))
    assert not c.on_batch(1, now_ms=0)
    assert not c.on_batch(1, now_ms=0)
    assert not c.on_batch(0, now_ms=0)
    assert c.on_batch(2, now_ms=0)
    assert not c.on_batch(2, now_ms=0)
    assert c.last_checkpoint_batch_ids == (1, 2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"interval_batches": 0}, "interval-batches must be at least 1"),
        ({"interval_ms": 0}, "interval-ms must be at least 1"),
        ({"interval_batches": None}, "no checkpoint"),
    ],
)
def test_invalid_intervals_are_rejected(kwargs: dict[str, int | None], message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        CheckpointConfig(**kwargs)  # type: ignore[arg-type]


def test_config_from_string_properties() -> None:
    assert CheckpointConfig.from_properties({}) == CheckpointConfig()
    cfg = CheckpointConfig.from_properties(
        {"checkpoint.interval-batches": "none", "checkpoint.interval-ms": "60000"}
    )
    assert cfg == CheckpointConfig(interval_batches=None, interval_ms=60000)
    with pytest.raises(InvalidOptionError, match=r"checkpoint.interval-ms.*'soon'"):
        CheckpointConfig.from_properties({"checkpoint.interval-ms": "soon"})
