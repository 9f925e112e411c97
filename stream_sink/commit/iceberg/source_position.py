"""An Iceberg sink's source position: snapshot summaries plus a durable table property.

A commit whose group carries the query's offsets (:class:`~..source_position.BatchOffsets`)
sets, in the same metadata commit as its data and watermark,
- the summary keys :data:`SOURCE_OFFSETS` (a JSON array, one element per source; ``null``
  when the offsets could not be read) and :data:`EVENT_TIME_WATERMARK_MS` (only when
  the query has an event-time watermark), next to the watermark's job id, operator id
  and batch id, and
- the table property ``stream-sink.source-position.<operator>`` (``...@<branch>`` off
  main), a :class:`~..source_position.SourcePosition` naming the snapshot, which no
  snapshot expiry removes (as the watermark's record, :mod:`.watermark`).

The summary keys are plain strings any engine reads (``SELECT summary FROM t.snapshots``).
The position of an operator is the property's when its snapshot is an ancestor of the
branch head or expired, else that of the newest snapshot in the head's ancestry that
recorded one (the branch was rolled back past the property's commit).
"""

from __future__ import annotations

from collections.abc import Iterator

from stream_sink.table.metadata import TableMetadata
from stream_sink.table.operations import SnapshotProducer, branch_head
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot

from ..source_position import (
    EVENT_TIME_WATERMARK_MS,
    POSITION_PREFIX,
    SOURCE_OFFSETS,
    BatchOffsets,
    EventTimeRange,
    SourcePosition,
    event_time_range,
    parse_sources,
    position_of,
    watermark_ms,
)
from .watermark import JOB_ID, OPERATOR_ID, iter_ancestry, summary_stamp

POSITION_PROPERTY_PREFIX = POSITION_PREFIX


def position_property(operator_id: str, branch: str = MAIN_BRANCH) -> str:
    """The table property holding (operator, branch)'s :class:`SourcePosition`."""
    key = POSITION_PROPERTY_PREFIX + operator_id
    return key if branch == MAIN_BRANCH else f"{key}@{branch}"


def stamp_position(
    producer: SnapshotProducer,
    offsets: BatchOffsets,
    job_id: str,
    operator_id: str,
    branch: str = MAIN_BRANCH,
    event_times: EventTimeRange | None = None,
) -> None:
    """Record ``offsets`` (and the commit's ``event_times``, whose summary keys the caller
    sets) in the snapshot ``producer`` commits and in the table property."""
    producer.set(SOURCE_OFFSETS, offsets.offsets_json or "null")
    if offsets.event_time_watermark_ms is not None:
        producer.set(EVENT_TIME_WATERMARK_MS, str(offsets.event_time_watermark_ms))
    position = position_of(offsets, job_id, operator_id, producer.snapshot_id, event_times)
    producer.set_table_property(position_property(operator_id, branch), position.to_json())


def summary_position(snapshot: Snapshot) -> SourcePosition | None:
    """The position a snapshot's summary records, or None when it records none."""
    summary = snapshot.summary
    operator, job, stamp = summary.get(OPERATOR_ID), summary.get(JOB_ID), summary_stamp(summary)
    if SOURCE_OFFSETS not in summary or operator is None or job is None or stamp is None:
        return None
    low, high = event_time_range(summary) or (None, None)
    return SourcePosition(
        job,
        operator,
        stamp,
        parse_sources(summary[SOURCE_OFFSETS]),
        watermark_ms(summary.get(EVENT_TIME_WATERMARK_MS)),
        snapshot.snapshot_id,
        snapshot.timestamp_ms,
        low,
        high,
    )


def recorded_position(
    metadata: TableMetadata, operator_id: str, branch: str = MAIN_BRANCH
) -> SourcePosition | None:
    raw = metadata.properties.get(position_property(operator_id, branch))
    return None if raw is None else SourcePosition.from_json(raw)


def sink_position(
    metadata: TableMetadata, operator_id: str, branch: str = MAIN_BRANCH
) -> SourcePosition | None:
    """The position of ``operator_id`` on ``branch`` (module docstring); None if none."""
    head = branch_head(metadata, branch)
    newest = next(_positions(metadata, head, operator_id), None)
    record = recorded_position(metadata, operator_id, branch)
    if record is None or record.version is None:
        return newest
    if newest is not None and newest.version == record.version:
        return newest
    if metadata.has_snapshot(record.version):
        ancestry = {s.snapshot_id for s in iter_ancestry(metadata, head)}
        if record.version not in ancestry:
            return newest  # rolled back past the recorded commit
        return newest or record
    return record  # its snapshot expired: the record outlives it


def sink_positions(metadata: TableMetadata) -> list[SourcePosition]:
    """The position of every operator that recorded one on the main branch, by operator."""
    operators = {
        key[len(POSITION_PROPERTY_PREFIX) :]
        for key in metadata.properties
        if key.startswith(POSITION_PROPERTY_PREFIX) and "@" not in key
    }
    for snap in iter_ancestry(metadata, metadata.current_snapshot()):
        position = summary_position(snap)
        if position is not None:
            operators.add(position.sink_id)
    out = [sink_position(metadata, op) for op in sorted(operators)]
    return [p for p in out if p is not None]


def complete_up_to(
    metadata: TableMetadata, operator_id: str, event_time_ms: int, branch: str = MAIN_BRANCH
) -> SourcePosition | None:
    """The oldest snapshot still in the branch's history whose commit by ``operator_id``
    recorded an event-time watermark at or above ``event_time_ms`` (every later snapshot
    is complete up to it too); None when no such snapshot is known yet."""
    found: SourcePosition | None = None
    for position in _positions(metadata, branch_head(metadata, branch), operator_id):
        mark = position.event_time_watermark_ms
        if mark is None or mark < event_time_ms:
            break
        found = position
    if found is None:
        record = sink_position(metadata, operator_id, branch)
        mark = record.event_time_watermark_ms if record is not None else None
        if record is not None and mark is not None and mark >= event_time_ms:
            return record  # only the durable record is left (its snapshot expired)
    return found


def _positions(
    metadata: TableMetadata, head: Snapshot | None, operator_id: str
) -> Iterator[SourcePosition]:
    for snap in iter_ancestry(metadata, head):
        position = summary_position(snap)
        if position is not None and position.sink_id == operator_id:
            yield position
