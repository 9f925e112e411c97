"""When to take a checkpoint: every N batches, every T milliseconds, or when forced.

The coordinator only decides; it writes nothing. A checkpoint it calls for covers
every batch seen since the previous one and takes the id of the last of them.
Time is only looked at when asked (``on_batch``/``is_due``): with no batches there is
nothing to checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stream_sink.exceptions import InvalidOptionError

INTERVAL_BATCHES = "checkpoint.interval-batches"
INTERVAL_MS = "checkpoint.interval-ms"


@dataclass(frozen=True)
class CheckpointConfig:
    """``interval_batches=None`` checkpoints by time only; at least one must be set."""

    interval_batches: int | None = 1
    interval_ms: int | None = None

    def __post_init__(self) -> None:
        if self.interval_batches is None and self.interval_ms is None:
            raise InvalidOptionError(
                f"set {INTERVAL_BATCHES} or {INTERVAL_MS}: without either no checkpoint "
                "would ever be taken"
            )
        if self.interval_batches is not None and self.interval_batches < 1:
            raise InvalidOptionError(
                f"{INTERVAL_BATCHES} must be at least 1, got {self.interval_batches}"
            )
        if self.interval_ms is not None and self.interval_ms < 1:
            raise InvalidOptionError(f"{INTERVAL_MS} must be at least 1, got {self.interval_ms}")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> CheckpointConfig:
        """From string options; an interval set to ``""`` or ``"none"`` is unset."""
        batches = _int_option(props, INTERVAL_BATCHES, default=1)
        return cls(interval_batches=batches, interval_ms=_int_option(props, INTERVAL_MS))


class CheckpointCoordinator:
    """Tracks the batches not yet in a checkpoint and says when to take one."""

    def __init__(self, config: CheckpointConfig | None = None, *, start_ms: int | None = None):
        self.config = config or CheckpointConfig()
        self._since_ms = start_ms
        self._pending: list[int] = []
        self._highest: int | None = None
        self.last_checkpoint_id: int | None = None
        self.last_checkpoint_batch_ids: tuple[int, ...] = ()

    @property
    def pending_batch_ids(self) -> tuple[int, ...]:
        """Batches seen since the last checkpoint, ascending."""
        return tuple(self._pending)

    def on_batch(self, batch_id: int, now_ms: int) -> bool:
        """Record ``batch_id``; True means: take checkpoint ``batch_id`` now.

        A batch id not above every id seen before (a replay) is not counted and never
        triggers a checkpoint. When this returns True the checkpoint counts as taken.
        """
        if self._since_ms is None:
            self._since_ms = now_ms
        if self._highest is not None and batch_id <= self._highest:
            return False
        self._highest = batch_id
        self._pending.append(batch_id)
        if self._batches_due() or self.is_due(now_ms):
            self._mark_taken(now_ms)
            return True
        return False

    def is_due(self, now_ms: int) -> bool:
        """True when batches are pending and ``interval_ms`` has passed since the last
        checkpoint (or since start); for callers that also check on a timer."""
        interval = self.config.interval_ms
        if not self._pending or interval is None or self._since_ms is None:
            return False
        return now_ms - self._since_ms >= interval

    def force(self, now_ms: int | None = None) -> int | None:
        """At end of input or stop: the id of a checkpoint covering the pending batches,
        or None when there are none."""
        if not self._pending:
            return None
        return self._mark_taken(now_ms if now_ms is not None else self._since_ms)

    def _batches_due(self) -> bool:
        n = self.config.interval_batches
        return n is not None and len(self._pending) >= n

    def _mark_taken(self, now_ms: int | None) -> int:
        self.last_checkpoint_batch_ids = tuple(self._pending)
        self.last_checkpoint_id = self._pending[-1]
        self._pending.clear()
        self._since_ms = now_ms
        return self.last_checkpoint_id


def _int_option(props: Mapping[str, str], key: str, default: int | None = None) -> int | None:
    raw = props.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("", "none"):
        return None
    try:
        return int(raw)
    except ValueError as e:
        raise InvalidOptionError(f"{key} must be an integer, got {raw!r}") from e
