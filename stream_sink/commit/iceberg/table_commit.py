"""Phase 2 against the table: one commit group becomes one snapshot, guarded by the watermark.

Invariants:
- Every snapshot carries the caller's properties plus :data:`JOB_ID`, :data:`OPERATOR_ID`
  and :data:`MAX_COMMITTED_CHECKPOINT_ID` (the sink's keys win over the caller's), and
  the same metadata commit sets the sink's durable :class:`WatermarkRecord` property,
  which survives snapshot expiry by any engine; with the query's offsets, the source
  position too (summary keys and property, :mod:`.source_position`).
- The watermark check runs inside the commit, after every refresh and retry, on the very
  metadata the snapshot is built on: a slow commit cannot land after another instance
  committed the same batches (Iceberg #14425).
- Files are only deleted when the table provably does not reference them: the ancestry
  walk must reach a snapshot of this (job, operator) older than the batches, or the root.
- An unknown commit outcome (a catalog server's 5xx, a dropped connection) is settled by
  committing again, with bounded backoff (``commit.retry.*``): the retry refreshes the
  table and runs the watermark check first, so a commit that did land is found by its
  watermark and never made twice; a retry that would land on a table which moved is
  refused by the catalog's compare-and-swap (the ref requirement of a REST commit).
  When retries run out the error is raised with the batches still staged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from stream_sink.exceptions import (
    CommitFailedError,
    CommitStateUnknownError,
    CommitValidationError,
    StalePositionsError,
)
from stream_sink.io.fileio import FileIO
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.retry import retrying
from stream_sink.table.manifest import (
    DataFile,
    ManifestEntryStatus,
    read_manifest,
    snapshot_manifests,
)
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.operations import RowDelta, SnapshotProducer, branch_head
from stream_sink.table.retry import RetryPolicy
from stream_sink.table.snapshots import Snapshot
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult
from stream_sink.write.snapshot import Operation, snapshot_producer

from ..failpoints import AFTER_METADATA_FILE_WRITE, AFTER_POSITION_DELETES, failpoint
from ..shapes import CommitGroup, Shape
from ..source_position import event_time_entries
from .event_time import event_time_range
from .position_deletes import PositionResolver, Resolution
from .source_position import stamp_position
from .watermark import (
    JOB_ID,
    MAX_COMMITTED_CHECKPOINT_ID,
    OPERATOR_ID,
    WatermarkRecord,
    iter_ancestry,
    stamp_of,
    watermark_from,
    watermark_property,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SinkIdentity:
    """Who commits: the ids stamped on snapshots, the branch and the caller's properties."""

    job_id: str
    operator_id: str
    branch: str
    properties: Mapping[str, str]
    event_time_column: str | None = None
    """The column whose low and high values the commit records (:mod:`.event_time`)."""


def commit_group(
    table: Table,
    group: CommitGroup,
    who: SinkIdentity,
    metrics: CommitterMetrics,
    positions: PositionResolver | None = None,
) -> int | None:
    """Commit ``group`` as one snapshot. Returns None when committed, or the watermark
    that refused it (another instance already committed batches at or above its
    lowest batch id); nothing is written to the table then. With ``positions``
    (``deletes="positions"``) the group's equality deletes are committed as positions
    (:mod:`.position_deletes`)."""
    seen: list[int] = []
    check = watermark_check(table, group, who, seen)
    started = time.perf_counter()
    try:
        if positions is not None and group.shape == Shape.ROW_DELTA:
            files = _commit_positions(table, group, who, check, positions)
        else:
            producer = _stamped(table, _producer(table, group, who.branch), group, who, check)
            producer.before_swap(lambda: failpoint(AFTER_METADATA_FILE_WRITE))
            _commit_settling_unknown(table, producer, group)
            files = group_files(group)
    except CommitValidationError:
        if not seen:
            raise
        log.warning("commit of batches %s..%s refused: %s", group.lowest, group.stamp, seen[-1])
        return seen[-1]
    except CommitFailedError as e:
        retries = RetryPolicy.from_properties(table.properties).num_retries
        raise CommitFailedError(
            f"table {table.name}: the commit of batches {group.lowest}..{group.stamp} lost the "
            f"race to concurrent commits {retries + 1} times; retries ran out "
            f"(commit.retry.num-retries={retries}): {e}. Nothing is lost: the batches stay "
            "staged in the operator state and commit exactly once when the sink restarts "
            "(raise commit.retry.num-retries if writers of this table often race)"
        ) from e
    duration_ms = (time.perf_counter() - started) * 1000
    metrics.committed(duration_ms, files)
    log_commit(table, group, who, files, duration_ms)
    return None


WatermarkCheck = Callable[[TableMetadata, "Snapshot | None"], None]
"""Run on every attempt's metadata and branch head: refuses a group already committed."""


def watermark_check(
    table: Table, group: CommitGroup, who: SinkIdentity, seen: list[int]
) -> WatermarkCheck:
    """Refuses (CommitValidationError) any attempt whose table shows a watermark of
    (job, operator) at or above the group's lowest batch; that watermark is appended to
    ``seen``."""

    def check(metadata: TableMetadata, head: Snapshot | None) -> None:
        mark = watermark_from(metadata, head, who.job_id, who.operator_id, who.branch)
        if mark >= group.lowest:
            seen.append(mark)
            raise CommitValidationError(
                f"table {table.name} branch {who.branch}: job {who.job_id} operator "
                f"{who.operator_id} already committed up to batch {mark}; refusing to commit "
                f"batches {group.lowest}..{group.stamp} again"
            )

    return check


def stamped_producer(
    table: Table, group: CommitGroup, who: SinkIdentity, seen: list[int]
) -> SnapshotProducer:
    """The snapshot of ``group`` with the sink's stamps and durable watermark record,
    refused on any attempt that finds the group committed (:func:`watermark_check`)."""
    check = watermark_check(table, group, who, seen)
    return _stamped(table, _producer(table, group, who.branch), group, who, check)


P = TypeVar("P", bound=SnapshotProducer)


def _stamped(
    table: Table, producer: P, group: CommitGroup, who: SinkIdentity, check: WatermarkCheck
) -> P:
    """``producer`` with the sink's snapshot properties, watermark and its check (and
    the event-time range of the group's data files, in ``table``'s schema)."""
    producer.set_all(dict(who.properties))
    producer.set(JOB_ID, who.job_id)
    producer.set(OPERATOR_ID, who.operator_id)
    producer.set(MAX_COMMITTED_CHECKPOINT_ID, str(group.stamp))
    record = WatermarkRecord(who.job_id, group.stamp, producer.snapshot_id)
    producer.set_table_property(watermark_property(who.operator_id, who.branch), record.to_json())
    event_times = None
    if who.event_time_column is not None:
        files = group_files(group)
        event_times = event_time_range(files, table.metadata.schema, who.event_time_column)
        producer.set_all(event_time_entries(event_times))
    if group.offsets is not None:
        stamp_position(
            producer, group.offsets, who.job_id, who.operator_id, who.branch, event_times
        )
    producer.validate(check)
    return producer


MAX_POSITION_RESOLVES = 8
"""Resolutions of one positions commit before it gives up (CommitFailedError): each one
follows a commit of another writer that landed between its lookup and its commit."""


def _commit_positions(
    table: Table,
    group: CommitGroup,
    who: SinkIdentity,
    check: WatermarkCheck,
    positions: PositionResolver,
) -> list[DataFile]:
    """Resolve the group's equality deletes at the branch head and commit the positions
    with the group's files; again when another commit lands in between. Returns the
    files committed."""
    for _ in range(MAX_POSITION_RESOLVES):
        resolution = None
        try:
            producer, resolution = resolved_producer(table, group, who, check, positions)
            producer.before_swap(lambda: failpoint(AFTER_METADATA_FILE_WRITE))
            failpoint(AFTER_POSITION_DELETES)
            _commit_settling_unknown(table, producer, group)
        except StalePositionsError as e:
            log.info("table %s: %s", table.name, e)
            positions.abandon(table, resolution, delete=True)
            continue
        except CommitStateUnknownError:
            positions.abandon(table, resolution, delete=False)
            raise
        except BaseException:
            positions.abandon(table, resolution, delete=True)
            raise
        positions.committed(table, resolution.result, producer.snapshot_id)
        return resolution_files(resolution)
    raise stale_too_often(table, group)


def resolved_producer(
    table: Table,
    group: CommitGroup,
    who: SinkIdentity,
    check: WatermarkCheck,
    positions: PositionResolver,
) -> tuple[SnapshotProducer, Resolution]:
    """The row delta of ``group`` with its equality deletes resolved to positions at the
    branch head (``table`` refreshed first), stamped as :func:`stamped_producer` stamps;
    ``check`` runs before any lookup (CommitValidationError: already committed), and
    every attempt of the producer refuses a head moved since the lookup
    (StalePositionsError: resolve again). The resolution's files are deleted when the
    producer cannot be made."""
    table.refresh()
    head = branch_head(table.metadata, who.branch)
    check(table.metadata, head)
    resolution = positions.resolve(table, head, _group_result(group))
    try:
        producer = _stamped(table, _delta(table, resolution, who.branch), group, who, check)
        producer.validate(resolution.unchanged)
    except BaseException:
        positions.abandon(table, resolution, delete=True)
        raise
    return producer, resolution


def resolution_files(resolution: Resolution) -> list[DataFile]:
    """The files a positions commit adds: the batch's data files and its positions."""
    return [*resolution.result.data_files, *resolution.result.delete_files]


def stale_too_often(table: Table, group: CommitGroup) -> CommitFailedError:
    return CommitFailedError(
        f"table {table.name}: other writers committed between resolving and committing "
        f"the deletes of batches {group.lowest}..{group.stamp} {MAX_POSITION_RESOLVES} times"
    )


def _delta(table: Table, resolution: Resolution, branch: str) -> SnapshotProducer:
    delta = snapshot_producer(
        table, resolution.result, branch=branch, operation="row-delta", validate_referenced=False
    )
    assert isinstance(delta, RowDelta)
    for old in resolution.replaced:
        delta.remove_deletes(old)
    return delta


def _commit_settling_unknown(table: Table, producer: SnapshotProducer, group: CommitGroup) -> None:
    """``producer.commit()``, retried while its outcome is unknown (see the invariants)."""
    policy = RetryPolicy.from_properties(table.properties)

    def log_retry(e: Exception, retry: int, wait_s: float) -> None:
        log.warning(
            "table %s: commit of batches %d..%d: outcome unknown (%s); checking the "
            "table and retrying in %.0f ms (%d of %d)",
            table.name,
            group.lowest,
            group.stamp,
            e,
            wait_s * 1000,
            retry,
            policy.num_retries,
        )

    unknown = replace(policy.backoff, deadline_s=None)  # num-retries bounds it, no timeout
    try:
        retrying(
            lambda _: producer.commit(),
            unknown,
            lambda e: isinstance(e, CommitStateUnknownError),
            on_retry=log_retry,
        )
    except CommitStateUnknownError as e:
        raise CommitStateUnknownError(
            f"table {table.name}: the outcome of committing batches {group.lowest}.."
            f"{group.stamp} stayed unknown after {unknown.max_attempts} attempts: {e}. Nothing "
            "is lost or deleted: the batches stay staged, and the sink's restart finds "
            "them in the table by their watermark or commits them once"
        ) from e


def log_commit(
    table: Table, group: CommitGroup, who: SinkIdentity, files: list[DataFile], duration_ms: float
) -> None:
    """The one INFO line per table commit (logger ``stream_sink.commit.iceberg.table_commit``)."""
    if not log.isEnabledFor(logging.INFO):
        return
    data = [f for f in files if not f.is_delete]
    deletes = [f for f in files if f.is_delete]
    log.info(
        "sink %s: committed batches %d..%d to %s: %d batches, %d rows, %d data files, "
        "%d delete files (%d deletes), watermark %d, %s on branch %s, %.0f ms",
        who.operator_id,
        group.lowest,
        group.stamp,
        table.name,
        len(group.batches),
        sum(f.record_count for f in data),
        len(data),
        len(deletes),
        sum(f.record_count for f in deletes),
        group.stamp,
        group.shape.value,
        who.branch,
        duration_ms,
    )


_OPERATIONS: dict[Shape, Operation] = {
    Shape.APPEND: "append",
    Shape.EMPTY: "append",
    Shape.ROW_DELTA: "row-delta",
    Shape.REPLACE_PARTITIONS: "replace-partitions",
}


def _group_result(group: CommitGroup) -> WriteResult:
    files = group_files(group)
    # a truncating batch is a group of its own (shapes): its snapshot empties the table
    truncate = any(b.files.truncate for b in group.batches)
    return WriteResult(
        tuple(f for f in files if not f.is_delete),
        tuple(f for f in files if f.is_delete),
        referenced_data_files=tuple(p for r in _results(group) for p in r.referenced_data_files),
        truncate=truncate,
    )


def _producer(table: Table, group: CommitGroup, branch: str) -> SnapshotProducer:
    result = _group_result(group)
    # No data-file validation for the streaming row delta: the sink's position deletes
    # only point at rows its own task wrote earlier in the same batch (stream_sink.write
    # .delta: an older row is deleted by an equality delete), so every referenced data
    # file is added by this very snapshot and no concurrent commit can have removed it.
    # (The starting snapshot such a check needs is unknown anyway: a staged batch may be
    # committed several checkpoints and restarts after its files were written.) A
    # compaction that rewrites files meanwhile validates against the sink's deletes; the
    # sink never validates against compaction.
    return snapshot_producer(
        table,
        result,
        branch=branch,
        operation=_OPERATIONS[group.shape],
        validate_referenced=False,
    )


def _results(group: CommitGroup) -> list[WriteResult]:
    out = []
    for b in group.batches:
        assert isinstance(b.files, WriteResult), "the Iceberg target commits WriteResults"
        out.append(b.files)
    return out


def group_files(group: CommitGroup) -> list[DataFile]:
    """The data and delete files of ``group``'s batches, in batch order."""
    return [f for r in _results(group) for f in (*r.data_files, *r.delete_files)]


# --- cleaning up files the table does not reference ---------------------------------------


def committed_paths(
    table: Table, job_id: str, operator_id: str, branch: str, from_batch: int
) -> set[str] | None:
    """Paths of the files added by snapshots of (job, operator) stamped ``>= from_batch``
    on ``branch``; None when the history needed to be sure is no longer in the metadata."""
    metadata = table.metadata
    paths: set[str] = set()
    last: Snapshot | None = None
    for snap in iter_ancestry(metadata, branch_head(metadata, branch)):
        last = snap
        stamp = stamp_of(snap.summary, job_id, operator_id)
        if stamp is None:
            continue
        if stamp < from_batch:
            return paths
        paths.update(_added_paths(table.io, snap))
    if last is not None and last.parent_snapshot_id is not None:
        return None  # the ancestry was cut (expired snapshots): cannot tell
    return paths


def _added_paths(io: FileIO, snap: Snapshot) -> Iterable[str]:
    for m in snapshot_manifests(io, snap):
        if m.added_snapshot_id != snap.snapshot_id or not m.has_added_files:
            continue
        for e in read_manifest(io, m):
            if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snap.snapshot_id:
                yield e.data_file.file_path


def delete_unreferenced(
    table: Table,
    files: Iterable[DataFile],
    referenced: Callable[[], set[str] | None],
) -> list[str]:
    """Delete those of ``files`` that ``referenced()`` does not list; nothing when it
    cannot tell (None). Failures only log. Returns the paths deleted."""
    candidates = [f.file_path for f in files]
    if not candidates:
        return []
    keep = referenced()
    if keep is None:
        log.warning(
            "not deleting %d uncommitted files of table %s: its history is incomplete",
            len(candidates),
            table.name,
        )
        return []
    deleted = []
    for path in candidates:
        if path in keep:
            continue
        try:
            table.io.delete(path)
            deleted.append(path)
        except Exception as e:  # cleanup only: never fail the commit path
            log.warning("could not delete uncommitted file %s: %s", path, e)
    return deleted
