"""A Delta sink's source position: in the ``commitInfo`` of the version carrying its data.

A commit whose group carries the query's offsets adds to its ``operationParameters``
(strings, as Delta's own writers put them) :data:`SINK_ID`, :data:`JOB_ID`,
:data:`SOURCE_BATCH`, :data:`SOURCE_OFFSETS` (a JSON array, one element per source;
``null`` when unknown) and :data:`EVENT_TIME_WATERMARK_MS` (only with an event-time
watermark), and with an ``event_time_column`` the low and high event time of the
commit's new data files (:data:`EVENT_TIME_LOW_MS`, :data:`EVENT_TIME_HIGH_MS`;
:mod:`.event_time`): the same version as the data and the ``txn`` watermark. ``DESCRIBE HISTORY``
shows them in every engine.

Reading back walks the commit files from the newest; a position is found as long as the
commit that recorded it is still in the log (Delta keeps commit files for
``delta.logRetentionDuration``, 30 days by default, and a checkpoint carries no
``commitInfo``): a sink that commits at least once in that time always has one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from stream_sink.delta.actions import CommitInfo
from stream_sink.delta.log import DeltaLog
from stream_sink.exceptions import MissingFileError

from ..source_position import (
    EVENT_TIME_WATERMARK_MS,
    SOURCE_BATCH,
    SOURCE_OFFSETS,
    BatchOffsets,
    SourcePosition,
    event_time_range,
    parse_sources,
    watermark_ms,
)

SINK_ID = "stream-sink.sink-id"
JOB_ID = "stream-sink.job-id"


def position_parameters(offsets: BatchOffsets | None, job_id: str, sink_id: str) -> dict[str, str]:
    """The ``operationParameters`` recording ``offsets`` (none without offsets)."""
    if offsets is None:
        return {}
    out = {
        SINK_ID: sink_id,
        JOB_ID: job_id,
        SOURCE_BATCH: str(offsets.batch_id),
        SOURCE_OFFSETS: offsets.offsets_json or "null",
    }
    if offsets.event_time_watermark_ms is not None:
        out[EVENT_TIME_WATERMARK_MS] = str(offsets.event_time_watermark_ms)
    return out


def commit_position(info: Mapping[str, Any], version: int) -> SourcePosition | None:
    """The position a ``commitInfo`` records, or None."""
    params = info.get("operationParameters")
    if not isinstance(params, Mapping) or SOURCE_OFFSETS not in params:
        return None
    try:
        batch = int(params[SOURCE_BATCH])
    except (KeyError, TypeError, ValueError):
        return None
    job, sink = params.get(JOB_ID), params.get(SINK_ID)
    if not isinstance(job, str) or not isinstance(sink, str):
        return None
    timestamp = info.get("timestamp")
    low, high = event_time_range(params) or (None, None)
    return SourcePosition(
        job,
        sink,
        batch,
        parse_sources(str(params[SOURCE_OFFSETS])),
        watermark_ms(params.get(EVENT_TIME_WATERMARK_MS)),
        version,
        int(timestamp) if isinstance(timestamp, int) else None,
        low,
        high,
    )


def positions(log: DeltaLog) -> Iterator[SourcePosition]:
    """Every recorded position still in the log, newest version first."""
    for version in reversed(log.list_commits()):
        try:
            actions = log.read_commit(version)
        except MissingFileError:  # cleaned up meanwhile: older ones are gone too
            return
        for action in actions:
            if isinstance(action, CommitInfo):
                position = commit_position(action.values, version)
                if position is not None:
                    yield position
                break


def sink_position(log: DeltaLog, sink_id: str) -> SourcePosition | None:
    """The newest position ``sink_id`` recorded in the log; None if none is left."""
    return next((p for p in positions(log) if p.sink_id == sink_id), None)


def sink_positions(log: DeltaLog) -> list[SourcePosition]:
    """The newest position of every sink that recorded one, by sink id."""
    seen: dict[str, SourcePosition] = {}
    for p in positions(log):
        seen.setdefault(p.sink_id, p)
    return [seen[k] for k in sorted(seen)]


def complete_up_to(log: DeltaLog, sink_id: str, event_time_ms: int) -> SourcePosition | None:
    """The oldest version still in the log whose commit by ``sink_id`` recorded an
    event-time watermark at or above ``event_time_ms``; None when none is known."""
    found: SourcePosition | None = None
    for p in positions(log):
        if p.sink_id != sink_id:
            continue
        mark = p.event_time_watermark_ms
        if mark is None or mark < event_time_ms:
            break
        found = p
    return found
