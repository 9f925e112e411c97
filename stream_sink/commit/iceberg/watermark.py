"""The committed watermark of a (job, operator) on a branch: snapshot summaries plus a
durable record in the table properties.

Every snapshot the sink commits carries :data:`JOB_ID`, :data:`OPERATOR_ID` and
:data:`MAX_COMMITTED_CHECKPOINT_ID`, and the same metadata commit sets the table
property ``stream-sink.watermark.<operator>`` (``...<operator>@<branch>`` off main) to
a :class:`WatermarkRecord` (job id, checkpoint id, snapshot id). Snapshots expire —
any engine's ``expire_snapshots(retain_last => 1)`` after a compaction leaves none
the sink stamped — while properties are carried by every commit of every engine.

The watermark of a (job, operator) is the larger of
- the value on the newest snapshot in the branch head's ancestry carrying both ids, and
- the record, when it names this job and its snapshot is either an ancestor of the
  head or no longer in the metadata (expired); a record whose snapshot is still
  known but off the branch's history (the branch was rolled back past it) is ignored;
and -1 when neither gives one. The watermark is scoped by job id: a new job (Spark
query id) starts at -1 even when a previous job wrote higher ids (Iceberg #18098).

This module is the one reader of an Iceberg sink's watermark: the committer
(:func:`committed_watermark`), ``stream-sink status`` (with :func:`last_stamped`),
``stream-sink table show`` (:func:`sink_watermarks`) and the demo
(:func:`summary_stamp`) all read it here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from stream_sink.table.metadata import TableMetadata
from stream_sink.table.operations import branch_head
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot

from ..target import INITIAL_WATERMARK as INITIAL_WATERMARK
from ..target import MAX_CONTINUOUS_EMPTY_COMMITS as MAX_CONTINUOUS_EMPTY_COMMITS

JOB_ID = "stream-sink.job-id"
OPERATOR_ID = "stream-sink.operator-id"
MAX_COMMITTED_CHECKPOINT_ID = "stream-sink.max-committed-checkpoint-id"
MANIFESTS_LOCATION = "stream-sink.manifests.location"

WATERMARK_PROPERTY_PREFIX = "stream-sink.watermark."

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatermarkRecord:
    """What the table property records about the sink's last commit to a branch."""

    job_id: str
    checkpoint_id: int
    snapshot_id: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "job-id": self.job_id,
                "checkpoint-id": self.checkpoint_id,
                "snapshot-id": self.snapshot_id,
            },
            separators=(",", ":"),
        )

    @staticmethod
    def from_json(text: str) -> WatermarkRecord | None:
        """The record, or None (logged) when the property is not one."""
        try:
            obj = json.loads(text)
            return WatermarkRecord(
                str(obj["job-id"]), int(obj["checkpoint-id"]), int(obj["snapshot-id"])
            )
        except (ValueError, TypeError, KeyError) as e:
            log.warning("ignoring malformed watermark record %r: %s", text[:200], e)
            return None


def watermark_property(operator_id: str, branch: str = MAIN_BRANCH) -> str:
    """The table property holding (operator, branch)'s :class:`WatermarkRecord`."""
    key = WATERMARK_PROPERTY_PREFIX + operator_id
    return key if branch == MAIN_BRANCH else f"{key}@{branch}"


def recorded_watermark(
    metadata: TableMetadata, operator_id: str, branch: str = MAIN_BRANCH
) -> WatermarkRecord | None:
    raw = metadata.properties.get(watermark_property(operator_id, branch))
    return None if raw is None else WatermarkRecord.from_json(raw)


def iter_ancestry(metadata: TableMetadata, head: Snapshot | None) -> Iterator[Snapshot]:
    """``head`` then its parents, newest first, while they are still in the metadata."""
    if head is None:
        return
    by_id: dict[int, Snapshot] | None = None
    current: Snapshot | None = head
    while current is not None:
        yield current
        pid = current.parent_snapshot_id
        if pid is None:
            return
        if by_id is None:  # built lazily: the common case stops at the head
            by_id = {s.snapshot_id: s for s in metadata.snapshots}
        current = by_id.get(pid)


def summary_stamp(summary: Mapping[str, str]) -> int | None:
    """The batch id a snapshot summary records (:data:`MAX_COMMITTED_CHECKPOINT_ID`),
    whichever job and sink stamped it; None when it records none or not a number."""
    value = summary.get(MAX_COMMITTED_CHECKPOINT_ID)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def stamp_of(summary: Mapping[str, str], job_id: str, operator_id: str) -> int | None:
    """The checkpoint id a snapshot summary records for (job, operator), else None."""
    if summary.get(JOB_ID) != job_id or summary.get(OPERATOR_ID) != operator_id:
        return None
    return summary_stamp(summary)


def last_stamped(
    metadata: TableMetadata, head: Snapshot | None, job_id: str, operator_id: str
) -> tuple[Snapshot, int] | None:
    """The newest snapshot of ``head``'s ancestry that (job, operator) stamped, and its
    stamp; None when none of those still in the metadata carries one."""
    for snap in iter_ancestry(metadata, head):
        stamp = stamp_of(snap.summary, job_id, operator_id)
        if stamp is not None:
            return snap, stamp
    return None


def watermark_from(
    metadata: TableMetadata,
    head: Snapshot | None,
    job_id: str,
    operator_id: str,
    branch: str = MAIN_BRANCH,
) -> int:
    """The watermark of (job, operator) on ``branch`` whose head is ``head``; -1 if
    none. See the module docstring."""
    last = last_stamped(metadata, head, job_id, operator_id)
    stamped, mark = last if last is not None else (None, INITIAL_WATERMARK)
    record = recorded_watermark(metadata, operator_id, branch)
    if record is None or record.job_id != job_id or record.checkpoint_id <= mark:
        return mark
    if stamped is not None and record.snapshot_id == stamped.snapshot_id:
        return record.checkpoint_id
    if metadata.has_snapshot(record.snapshot_id):
        ancestry = (s.snapshot_id for s in iter_ancestry(metadata, head))
        if record.snapshot_id not in ancestry:
            return mark  # rolled back past the recorded commit
    return record.checkpoint_id


def committed_watermark(
    metadata: TableMetadata, job_id: str, operator_id: str, branch: str = MAIN_BRANCH
) -> int:
    """The watermark of (job, operator) on ``branch``; a branch not created yet is read
    where its first commit will fork from (main's current snapshot), as commits build."""
    return watermark_from(metadata, branch_head(metadata, branch), job_id, operator_id, branch)


@dataclass(frozen=True)
class SinkWatermark:
    """One sink's newest job on the main branch and its watermark."""

    sink: str
    job: str | None
    watermark: int
    snapshot_id: int
    timestamp_ms: int | None
    """When the stamped snapshot was committed; None when the watermark is the durable
    record's (its snapshot may have expired)."""


def sink_watermarks(metadata: TableMetadata) -> list[SinkWatermark]:
    """Each sink that committed to the main branch, by sink id: the job of the newest
    snapshot it stamped and that stamp, or its durable record's job and checkpoint id
    when no snapshot of it is left or the record of that job is higher."""
    seen: dict[str, SinkWatermark] = {}
    for snap in iter_ancestry(metadata, metadata.current_snapshot()):
        sink = snap.summary.get(OPERATOR_ID)
        mark = summary_stamp(snap.summary)
        if sink is None or mark is None or sink in seen:
            continue
        job = snap.summary.get(JOB_ID)
        seen[sink] = SinkWatermark(sink, job, mark, snap.snapshot_id, snap.timestamp_ms)
    for key in metadata.properties:
        sink = key[len(WATERMARK_PROPERTY_PREFIX) :]
        if not key.startswith(WATERMARK_PROPERTY_PREFIX) or "@" in sink:
            continue  # "@<branch>": another branch's record
        record = recorded_watermark(metadata, sink)
        if record is None:
            continue
        row = seen.get(sink)
        if row is None or (row.job == record.job_id and row.watermark < record.checkpoint_id):
            seen[sink] = SinkWatermark(
                sink, record.job_id, record.checkpoint_id, record.snapshot_id, None
            )
    return [seen[k] for k in sorted(seen)]
