"""The committed watermark of a (job, operator) on a branch, read from snapshot summaries.

Every snapshot the sink commits carries :data:`JOB_ID`, :data:`OPERATOR_ID` and
:data:`MAX_COMMITTED_CHECKPOINT_ID`. The watermark of a (job, operator) is the value on
the newest snapshot in the branch head's ancestry that carries both ids; -1 if none.
The watermark is scoped by job id: a new job (Spark query id) starts at -1 even when a
previous job wrote higher ids (Iceberg #18098).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from stream_sink.table.metadata import TableMetadata
from stream_sink.table.operations import branch_head
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot

from .target import INITIAL_WATERMARK as INITIAL_WATERMARK
from .target import MAX_CONTINUOUS_EMPTY_COMMITS as MAX_CONTINUOUS_EMPTY_COMMITS

JOB_ID = "stream-sink.job-id"
OPERATOR_ID = "stream-sink.operator-id"
MAX_COMMITTED_CHECKPOINT_ID = "stream-sink.max-committed-checkpoint-id"
MANIFESTS_LOCATION = "stream-sink.manifests.location"


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


def stamp_of(summary: Mapping[str, str], job_id: str, operator_id: str) -> int | None:
    """The checkpoint id a snapshot summary records for (job, operator), else None."""
    if summary.get(JOB_ID) != job_id or summary.get(OPERATOR_ID) != operator_id:
        return None
    value = summary.get(MAX_COMMITTED_CHECKPOINT_ID)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def watermark_from(
    metadata: TableMetadata, head: Snapshot | None, job_id: str, operator_id: str
) -> int:
    """The watermark of (job, operator) in the ancestry of ``head``; -1 if none."""
    for snap in iter_ancestry(metadata, head):
        stamp = stamp_of(snap.summary, job_id, operator_id)
        if stamp is not None:
            return stamp
    return INITIAL_WATERMARK


def committed_watermark(
    metadata: TableMetadata, job_id: str, operator_id: str, branch: str = MAIN_BRANCH
) -> int:
    """The watermark of (job, operator) on ``branch``; a branch not created yet is read
    where its first commit will fork from (main's current snapshot), as commits build."""
    return watermark_from(metadata, branch_head(metadata, branch), job_id, operator_id)
