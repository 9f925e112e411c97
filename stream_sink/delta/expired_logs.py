"""Removing expired log entries after a checkpoint (Delta's ``MetadataCleanup``).

Each commit adds a ``%020d.json`` to ``_delta_log`` and every
``delta.checkpointInterval`` commits a checkpoint; without cleanup the log grows by a
file a commit for ever. After writing a checkpoint, the writer removes the commit
files, checkpoints and ``.crc`` files of versions below the newest checkpoint that is
older than ``delta.logRetentionDuration`` (default ``interval 30 days``), when they are
older than it too and ``delta.enableExpiredLogCleanup`` is not ``false``.

Invariants:
- The table stays readable at every version from that checkpoint on: nothing at or
  above its version is touched, and it is complete (a checkpoint is written in full
  before its name appears).
- Only versions whose files are past the retention go: time travel keeps its
  promised window; a streaming writer's ``txn`` (its watermark) is in every checkpoint.
- Failures only log: a log entry left behind is harmless.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping

from stream_sink.exceptions import InvalidOptionError

from .log import DeltaLog

log = logging.getLogger(__name__)

LOG_RETENTION = "delta.logRetentionDuration"
ENABLE_CLEANUP = "delta.enableExpiredLogCleanup"
DEFAULT_LOG_RETENTION_MS = 30 * 24 * 3600 * 1000
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
DEFAULT_DELETED_FILE_RETENTION_MS = 7 * 24 * 3600 * 1000
_INTERVAL = re.compile(r"^\s*(?:interval\s+)?(\d+)\s*([a-z]+?)s?\s*$", re.IGNORECASE)
_UNIT_MS = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}
_VERSIONED = re.compile(r"^(\d{20})\.(json|checkpoint\.parquet|crc)$")


def interval_ms(text: str, key: str = LOG_RETENTION) -> int:
    """``interval 30 days`` (Delta's CalendarInterval text) in milliseconds."""
    m = _INTERVAL.match(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNIT_MS:
        raise InvalidOptionError(
            f"Delta table property {key}={text!r} is not an interval such as 'interval 30 days'"
        )
    return int(m.group(1)) * _UNIT_MS[unit]


def retention_ms(configuration: Mapping[str, str]) -> int | None:
    """The log retention, or None when expired log cleanup is off."""
    if configuration.get(ENABLE_CLEANUP, "true").strip().lower() == "false":
        return None
    raw = configuration.get(LOG_RETENTION)
    return DEFAULT_LOG_RETENTION_MS if raw is None else interval_ms(raw)


def deleted_file_retention_ms(configuration: Mapping[str, str]) -> int:
    """How long a ``remove`` keeps its file: vacuum spares the file and checkpoints keep
    the tombstone until then (default ``interval 7 days``)."""
    raw = configuration.get(DELETED_FILE_RETENTION)
    if raw is None:
        return DEFAULT_DELETED_FILE_RETENTION_MS
    return interval_ms(raw, DELETED_FILE_RETENTION)


def expired_log_files(delta_log: DeltaLog, retention: int, now_ms: int) -> list[str]:
    """Paths of the log entries that may go (see the module docstring), oldest first."""
    cutoff = now_ms - retention
    found: list[tuple[int, str, int]] = []
    for f in delta_log.io.walk(delta_log.log_dir):
        m = _VERSIONED.match(f.relative)
        if m is not None:
            found.append((int(m.group(1)), m.group(2), f.mtime_ms))
    floor = max(
        (v for v, kind, mtime in found if kind == "checkpoint.parquet" and mtime < cutoff),
        default=None,
    )
    if floor is None:
        return []
    return [
        f"{delta_log.log_dir}/{v:020d}.{kind}"
        for v, kind, mtime in sorted(found)
        if v < floor and mtime < cutoff
    ]


def remove_expired_logs(
    delta_log: DeltaLog, configuration: Mapping[str, str], now_ms: int | None = None
) -> int:
    """Remove :func:`expired_log_files`; returns how many went. Never raises."""
    removed = 0
    try:
        retention = retention_ms(configuration)
        if retention is None:
            return 0
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for path in expired_log_files(delta_log, retention, now):
            try:
                delta_log.io.delete(path)
                removed += 1
            except OSError as e:
                log.warning("Delta table %s: could not remove %s: %s", delta_log.location, path, e)
    except Exception as e:  # cleanup only
        log.warning("Delta table %s: expired log cleanup failed: %s", delta_log.location, e)
    return removed
