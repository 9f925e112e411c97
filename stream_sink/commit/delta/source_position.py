"""A Delta sink's source position: in the ``commitInfo`` of the version carrying its data,
and in a per-sink domain of the table's domain metadata.

A commit whose group carries the query's offsets adds to its ``operationParameters``
(strings, as Delta's own writers put them) :data:`SINK_ID`, :data:`JOB_ID`,
:data:`SOURCE_BATCH`, :data:`SOURCE_OFFSETS` (a JSON array, one element per source;
``null`` when unknown) and :data:`EVENT_TIME_WATERMARK_MS` (only with an event-time
watermark), and with an ``event_time_column`` the low and high event time of the
commit's new data files (:data:`EVENT_TIME_LOW_MS`, :data:`EVENT_TIME_HIGH_MS`;
:mod:`.event_time`): the same version as the data and the ``txn`` watermark. ``DESCRIBE HISTORY``
shows them in every engine.

When the table's protocol lists the ``domainMetadata`` writer feature, the same commit
also writes the domain :func:`position_domain` (``stream-sink.source-position.<sink>``)
whose configuration is the :class:`SourcePosition` JSON an Iceberg sink keeps in its
table property, naming the version and commit time it landed at. Domain metadata is
table state: checkpoints carry it, so it outlives the log cleanup of the commit that
wrote it (``delta.logRetentionDuration``, 30 days by default), as the ``txn`` watermark
does. Without the feature nothing but the ``commitInfo`` is written (the protocol is
never raised silently).

Reading back: the newest ``commitInfo`` position of the sink still in the log, unless
the domain records a newer version (its commit was cleaned up), then the domain's.
Without the domain a position is found only while the commit that recorded it is in the
log: a sink that commits at least once per retention period always has one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from stream_sink.delta.actions import CommitInfo
from stream_sink.delta.features import DOMAIN_METADATA, writer_features
from stream_sink.delta.log import DeltaLog
from stream_sink.delta.replay import load_snapshot
from stream_sink.delta.snapshot import DeltaSnapshot
from stream_sink.delta.transaction import DeltaTransaction
from stream_sink.exceptions import MissingFileError

from ..source_position import (
    EVENT_TIME_WATERMARK_MS,
    POSITION_PREFIX,
    SOURCE_BATCH,
    SOURCE_OFFSETS,
    BatchOffsets,
    EventTimeRange,
    SourcePosition,
    event_time_range,
    parse_sources,
    position_of,
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


def position_domain(sink_id: str) -> str:
    """The domain holding ``sink_id``'s :class:`SourcePosition`."""
    return POSITION_PREFIX + sink_id


def stamp_domain(
    txn: DeltaTransaction,
    offsets: BatchOffsets | None,
    job_id: str,
    sink_id: str,
    event_times: EventTimeRange | None = None,
) -> bool:
    """Write the position domain of ``offsets`` in ``txn`` when the protocol of the
    snapshot it reads lists ``domainMetadata``; whether it did."""
    if offsets is None or DOMAIN_METADATA not in writer_features(txn.read_snapshot.protocol):
        return False
    txn.set_domain(position_domain(sink_id), _encoder(offsets, job_id, sink_id, event_times))
    return True


def _encoder(
    offsets: BatchOffsets, job_id: str, sink_id: str, event_times: EventTimeRange | None
) -> Callable[[int, int], str]:
    def encode(version: int, timestamp_ms: int) -> str:
        position = position_of(offsets, job_id, sink_id, version, event_times)
        return replace(position, timestamp_ms=timestamp_ms).to_json()

    return encode


def recorded_position(snapshot: DeltaSnapshot, sink_id: str) -> SourcePosition | None:
    """The position the snapshot's domain for ``sink_id`` holds; None without one."""
    raw = snapshot.domain_configuration(position_domain(sink_id))
    return None if raw is None else SourcePosition.from_json(raw)


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


def positions(log: DeltaLog, floor: int = 0) -> Iterator[SourcePosition]:
    """Every recorded ``commitInfo`` position still in the log at or above version
    ``floor``, newest version first."""
    for version in reversed(log.list_commits()):
        if version < floor:
            return
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


def _newer(logged: SourcePosition | None, record: SourcePosition | None) -> SourcePosition | None:
    """The newer of a ``commitInfo`` position and a domain record (the logged one when
    both name the same version)."""
    if record is None or record.version is None:
        return logged
    if logged is not None and logged.version is not None and logged.version >= record.version:
        return logged
    return record


def sink_position(
    log: DeltaLog, sink_id: str, snapshot: DeltaSnapshot | None = None
) -> SourcePosition | None:
    """The newest position ``sink_id`` recorded (module docstring); None if none is
    left. ``snapshot``: the table's current one (default: loaded from ``log``)."""
    record = recorded_position(snapshot or load_snapshot(log), sink_id)
    floor = record.version if record is not None and record.version is not None else 0
    logged = next((p for p in positions(log, floor) if p.sink_id == sink_id), None)
    return _newer(logged, record)


def sink_positions(log: DeltaLog, snapshot: DeltaSnapshot | None = None) -> list[SourcePosition]:
    """The newest position of every sink that recorded one, by sink id."""
    snapshot = snapshot or load_snapshot(log)
    seen: dict[str, SourcePosition] = {}
    for p in positions(log):
        seen.setdefault(p.sink_id, p)
    sinks = set(seen) | {
        d[len(POSITION_PREFIX) :] for d in snapshot.domains if d.startswith(POSITION_PREFIX)
    }
    out = (_newer(seen.get(s), recorded_position(snapshot, s)) for s in sorted(sinks))
    return [p for p in out if p is not None]


def complete_up_to(
    log: DeltaLog, sink_id: str, event_time_ms: int, snapshot: DeltaSnapshot | None = None
) -> SourcePosition | None:
    """The oldest version still in the log whose commit by ``sink_id`` recorded an
    event-time watermark at or above ``event_time_ms``; None when none is known.

    Once the commits carrying the sink's positions are cleaned up, only its domain
    record is left: then the answer is the record's version when its watermark is at or
    above ``event_time_ms`` (that version and every later one are complete up to it,
    but an older cleaned-up version may have been too), else None."""
    found: SourcePosition | None = None
    for p in positions(log):
        if p.sink_id != sink_id:
            continue
        mark = p.event_time_watermark_ms
        if mark is None or mark < event_time_ms:
            break
        found = p
    if found is not None:
        return found
    record = sink_position(log, sink_id, snapshot)
    mark = None if record is None else record.event_time_watermark_ms
    return record if mark is not None and mark >= event_time_ms else None
