"""Phase 2 of one checkpoint against several Iceberg tables at once: one catalog
transaction (:meth:`~stream_sink.table.catalog.base.Catalog.commit_tables`) carrying
every table's snapshot, each guarded by its own watermark, so a reader sees the
checkpoint on every table or on none.

The entry point is :func:`commit_checkpoint`, given each table's staged commit of the
checkpoint (its commit group and sink identity, as :func:`.table_commit.commit_group`
gets it); :func:`commit_together` is the same as the commit driver's hook
(``CommitDriver(commit_together=commit_together)``), fed from each table's
``FilesCommitter``. A routed sink says once at start how its checkpoints commit
(:func:`log_commit_mode`); where the catalog cannot commit atomically (Hadoop, a REST
server without ``transactions/commit``) the tables commit one by one, each as a
single-table sink commits. Only each table's last snapshot of a checkpoint goes into
the transaction: a table whose checkpoint is several snapshots (one per batch of a row
delta, a TRUNCATE) commits the earlier ones on its own first.

Invariants:
- Each table's snapshot is the single-table path's (:func:`.table_commit.stamped_producer`):
  the same stamps, the same durable watermark record in the same metadata commit, and
  the watermark check on every attempt, after the refresh, before anything is written.
- Every attempt refreshes every table and runs every watermark check first; a table
  whose watermark already covers its group is left out of the transaction and its
  watermark returned (the caller drops those batches, as for one table).
- A lost race (CommitFailedError: some table moved) deletes what the attempt wrote and
  retries per ``commit.retry.*`` of the first table. An unknown outcome
  (CommitStateUnknownError) keeps every file and is settled by the next attempt's
  watermark checks: every table of the transaction refuses (it landed: returned as
  refused at the stamp) or none does (it did not: committed again; the compare-and-swap
  of each table keeps a late landing of the first from doubling it).
- After either, the next attempt first checks that the transaction's snapshots (their
  ids are this commit's own) are in all its tables or in none: some and not others is
  a torn transaction (a catalog that is not atomic after all), PartialCommitError,
  nothing retried or deleted.
- The commit locks of every table are taken in the order of their locations, so two
  committers of overlapping table sets in one process cannot deadlock.
- ``deletes="positions"``: a table's row delta is resolved (its deletes to positions)
  at the head each attempt refreshed, after its watermark check; a head that moves
  before the swap resolves it again (as the single-table path does), a lost race
  deletes the resolution's files, an unknown outcome keeps them.
- Failpoints: ``after-tables-metadata-write`` before the transaction,
  ``inside-tables-swap`` after each table's pointer moved inside it (SQL),
  ``after-tables-commit`` after it committed, before any table adopts it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from stream_sink.exceptions import (
    AtomicCommitUnsupportedError,
    CommitFailedError,
    CommitStateUnknownError,
    CommitValidationError,
    PartialCommitError,
    StalePositionsError,
    ValidationError,
)
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.retry import retrying
from stream_sink.table.catalog.base import Catalog, TableCommit
from stream_sink.table.commit_lock import commit_lock
from stream_sink.table.operations import PreparedSnapshot, SnapshotProducer
from stream_sink.table.retry import RetryPolicy
from stream_sink.table.table import Table

from ..failpoints import (
    AFTER_POSITION_DELETES,
    AFTER_TABLES_COMMIT,
    AFTER_TABLES_METADATA_WRITE,
    INSIDE_TABLES_SWAP,
    LOST_TABLES_ANSWER,
    fault,
)
from ..failpoints import failpoint as _failpoint
from ..shapes import CommitGroup, Shape
from .position_deletes import PositionResolver, Resolution
from .table_commit import (
    MAX_POSITION_RESOLVES,
    SinkIdentity,
    commit_group,
    group_files,
    log_commit,
    resolution_files,
    resolved_producer,
    stale_too_often,
    stamped_producer,
    watermark_check,
)
from .target import IcebergTarget

if TYPE_CHECKING:
    from ..committer import FilesCommitter
    from ..driver import TogetherPart

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableCheckpoint:
    """One table's staged commit of the checkpoint."""

    table: Table
    group: CommitGroup
    who: SinkIdentity
    metrics: CommitterMetrics
    positions: PositionResolver | None = None
    """The target's resolver of ``deletes="positions"``: such a table's row delta resolves
    its deletes at the head each attempt refreshed (:func:`.table_commit.resolved_producer`)."""

    @property
    def name(self) -> str:
        return str(self.table.name)


@dataclass
class _Part:
    """A table's place in the attempts: its producer (one snapshot id for all of them;
    with positions, one per resolution, made by :func:`_prepare_one`)."""

    checkpoint: TableCheckpoint
    producer: SnapshotProducer | None
    seen: list[int]
    """The watermarks the producer's check refused with (it appends to this list)."""
    resolution: Resolution | None = None
    """With positions: the resolution ``producer`` commits."""
    sent: int | None = None
    """The snapshot id the last transaction carried for this table."""

    @property
    def resolves(self) -> bool:
        return (
            self.checkpoint.positions is not None and self.checkpoint.group.shape == Shape.ROW_DELTA
        )


def _part(t: TableCheckpoint) -> _Part:
    seen: list[int] = []
    part = _Part(t, None, seen)
    if not part.resolves:
        part.producer = stamped_producer(t.table, t.group, t.who, seen)
    return part


def atomic_commit_problem(catalog: Catalog) -> str | None:
    """Why ``catalog`` cannot commit a checkpoint's tables atomically; None when it can."""
    return catalog.multi_table_commit_problem()


def commit_checkpoint(tables: Sequence[TableCheckpoint]) -> dict[str, int | None]:
    """Commit every table's group of one checkpoint, atomically where the catalog can.

    Returns, per table name, None when committed, or the watermark that refused it
    (see :func:`.table_commit.commit_group`). Tables must share one catalog."""
    if not tables:
        return {}
    catalog = _one_catalog(tables)
    if catalog is None or len(tables) == 1 or atomic_commit_problem(catalog):
        return _one_by_one(tables)
    try:
        return _atomically(catalog, tables)
    except AtomicCommitUnsupportedError as e:  # found out only now (REST: 404/501)
        log.warning("committing tables one by one from now on: %s", e)
        return _one_by_one(tables)


def _one_catalog(tables: Sequence[TableCheckpoint]) -> Catalog | None:
    """The one catalog object every table was loaded from; None (logged) when not."""
    catalog = tables[0].table.catalog
    names = [t.name for t in tables]
    if len(set(names)) != len(names):
        raise ValidationError(f"a checkpoint commit names a table twice: {sorted(names)}")
    if any(t.table.catalog is not catalog for t in tables):
        log.warning("tables %s are not in one catalog: committing them one by one", names)
        return None
    return catalog


def _one_by_one(tables: Sequence[TableCheckpoint]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for t in tables:
        out[t.name] = commit_group(t.table, t.group, t.who, t.metrics, t.positions)
    return out


def _atomically(catalog: Catalog, tables: Sequence[TableCheckpoint]) -> dict[str, int | None]:
    parts = [_part(t) for t in tables]
    refused: dict[str, int] = {}
    in_flight: list[str] = []  # the tables of the last transaction that failed or went unanswered
    policy = RetryPolicy.from_properties(tables[0].table.properties)
    started = time.perf_counter()

    def attempt(n: int) -> None:
        _attempt(catalog, parts, refused, in_flight, n)

    def failed_retrying(_: int) -> None:
        policy.run(attempt)

    try:
        _settling_unknown(failed_retrying, policy, [t.name for t in tables])
    except CommitFailedError as e:
        raise CommitFailedError(
            f"tables {', '.join(t.name for t in tables)}: the commit of one checkpoint lost "
            f"the race to concurrent commits {policy.num_retries + 1} times: {e}. Nothing is "
            "lost: the batches stay staged and commit exactly once when the sink restarts"
        ) from e
    duration_ms = (time.perf_counter() - started) * 1000
    out: dict[str, int | None] = {}
    for p in parts:
        t = p.checkpoint
        if t.name in refused:
            out[t.name] = refused[t.name]
            continue
        files = resolution_files(p.resolution) if p.resolution else group_files(t.group)
        t.metrics.committed(duration_ms, files)
        log_commit(t.table, t.group, t.who, files, duration_ms)
        out[t.name] = None
    return out


def _attempt(
    catalog: Catalog, parts: list[_Part], refused: dict[str, int], in_flight: list[str], n: int
) -> None:
    live = [p for p in parts if p.checkpoint.name not in refused]
    with contextlib.ExitStack() as locks:
        for location in sorted({p.checkpoint.table.location for p in live}):
            locks.enter_context(commit_lock(location))
        prepared = _prepare(live, refused, n)
        try:
            _check_torn(parts, in_flight)
        except PartialCommitError:
            _abandon(prepared)
            raise
        if not prepared:
            return
        _swap(catalog, prepared, in_flight)


def _prepare(
    live: list[_Part], refused: dict[str, int], n: int
) -> list[tuple[_Part, PreparedSnapshot]]:
    """Every live table refreshed, checked and written; refused tables recorded."""
    prepared: list[tuple[_Part, PreparedSnapshot]] = []
    try:
        for p in live:
            try:
                prepared.append((p, _prepare_one(p, n)))
            except CommitValidationError:
                if not p.seen:
                    raise
                refused[p.checkpoint.name] = p.seen[-1]
                log.warning(
                    "table %s: commit of batches %d..%d refused: watermark %d",
                    p.checkpoint.name,
                    p.checkpoint.group.lowest,
                    p.checkpoint.group.stamp,
                    p.seen[-1],
                )
    except BaseException:
        _abandon(prepared)
        raise
    return prepared


def _prepare_one(p: _Part, n: int) -> PreparedSnapshot:
    """Attempt ``n`` of one table up to its swap; with positions, its deletes resolved
    at the head just refreshed, again while another commit lands in between."""
    if not p.resolves:
        assert p.producer is not None  # made once, by _part
        return p.producer.prepare(n)
    t = p.checkpoint
    assert t.positions is not None
    for _ in range(MAX_POSITION_RESOLVES):
        check = watermark_check(t.table, t.group, t.who, p.seen)
        p.producer, p.resolution = resolved_producer(t.table, t.group, t.who, check, t.positions)
        try:
            ready = p.producer.prepare(n)
        except StalePositionsError as e:
            log.info("table %s: %s", t.name, e)
            _drop_resolution(p, delete=True)
            continue
        except BaseException:
            _drop_resolution(p, delete=True)
            raise
        _failpoint(AFTER_POSITION_DELETES)
        return ready
    raise stale_too_often(t.table, t.group)


def _drop_resolution(p: _Part, *, delete: bool) -> None:
    """Forget ``p``'s resolution (its index's keys were taken); its files are deleted
    when ``delete`` (never after an unknown outcome: they may be in the table)."""
    t = p.checkpoint
    if p.resolution is not None and t.positions is not None:
        t.positions.abandon(t.table, p.resolution, delete=delete)
    p.resolution = None


def _abandon(prepared: list[tuple[_Part, PreparedSnapshot]]) -> None:
    """Delete what the prepared attempts wrote: no table references it."""
    for p, ready in prepared:
        assert p.producer is not None
        p.producer.abandon(ready)
        _drop_resolution(p, delete=True)


def _check_torn(parts: list[_Part], in_flight: list[str]) -> None:
    """After a transaction that failed or whose outcome was unknown (``in_flight``, the
    tables it carried, each just refreshed): its snapshots are in all of those tables
    or in none. A server that validates every table first and then commits them one
    by one (Apache Iceberg's reference ``CatalogHandlers``) can answer 409 or 5xx with
    some of them applied; the snapshot ids (random, this commit's own) tell."""
    if not in_flight:
        return
    carried = [p for p in parts if p.checkpoint.name in in_flight]
    shown = [p.checkpoint.name for p in carried if _holds_ours(p)]
    in_flight.clear()
    if shown and len(shown) != len(carried):
        missing = [p.checkpoint.name for p in carried if not _holds_ours(p)]
        raise PartialCommitError(
            f"the atomic commit of tables {', '.join(p.checkpoint.name for p in carried)} "
            f"shows on {', '.join(shown)} but not on {', '.join(missing)}: the catalog did "
            "not apply it atomically. Nothing was deleted or retried; look at the tables "
            "before restarting the sink"
        )


def _holds_ours(p: _Part) -> bool:
    return p.sent is not None and p.checkpoint.table.metadata.has_snapshot(p.sent)


def _swap(
    catalog: Catalog, prepared: list[tuple[_Part, PreparedSnapshot]], in_flight: list[str]
) -> None:
    commits = [
        TableCommit(r.table.identifier, r.base_location, r.base, r.metadata) for _, r in prepared
    ]
    for p, ready in prepared:
        p.sent = ready.snapshot.snapshot_id
    try:
        done = catalog.commit_tables(
            commits,
            before_swap=lambda: _failpoint(AFTER_TABLES_METADATA_WRITE),
            after_each_swap=lambda _: _failpoint(INSIDE_TABLES_SWAP),
        )
    except CommitStateUnknownError:
        _unknown(prepared, in_flight)
        raise
    except CommitFailedError:  # the catalog read every table back: none moved
        in_flight[:] = [p.checkpoint.name for p, _ in prepared]
        _abandon(prepared)
        raise
    except AtomicCommitUnsupportedError:
        _abandon(prepared)
        raise
    _failpoint(AFTER_TABLES_COMMIT)
    if fault(LOST_TABLES_ANSWER):  # committed; the sink never hears so
        _unknown(prepared, in_flight)
        raise CommitStateUnknownError(
            f"tables {', '.join(in_flight)}: the transaction's answer was lost "
            f"(fault point {LOST_TABLES_ANSWER})"
        )
    for (p, ready), result in zip(prepared, done, strict=True):
        assert p.producer is not None
        p.producer.landed(ready, result.location, result.metadata)
        t = p.checkpoint
        if p.resolution is not None and t.positions is not None:
            t.positions.committed(t.table, p.resolution.result, ready.snapshot.snapshot_id)


def _unknown(prepared: list[tuple[_Part, PreparedSnapshot]], in_flight: list[str]) -> None:
    """The transaction's outcome is unknown: its tables are checked by the next attempt;
    every file is kept (the transaction may have landed)."""
    in_flight[:] = [p.checkpoint.name for p, _ in prepared]
    for p, _ in prepared:
        _drop_resolution(p, delete=False)


def _settling_unknown(run: Callable[[int], None], policy: RetryPolicy, names: list[str]) -> None:
    """``run``, retried while its outcome is unknown (the next attempt settles it)."""

    def log_retry(e: Exception, retry: int, wait_s: float) -> None:
        log.warning(
            "tables %s: commit of one checkpoint: outcome unknown (%s); checking every "
            "table and retrying in %.0f ms (%d of %d)",
            ", ".join(names),
            e,
            wait_s * 1000,
            retry,
            policy.num_retries,
        )

    unknown = replace(policy.backoff, deadline_s=None)
    try:
        retrying(
            run,
            unknown,
            lambda e: isinstance(e, CommitStateUnknownError),
            on_retry=log_retry,
        )
    except CommitStateUnknownError as e:
        raise CommitStateUnknownError(
            f"tables {', '.join(names)}: the outcome of committing one checkpoint stayed "
            f"unknown after {unknown.max_attempts} attempts: {e}. Nothing is lost or "
            "deleted: the batches stay staged, and the sink's restart finds them in the "
            "tables by their watermarks or commits them once"
        ) from e


# --- the commit driver's hook --------------------------------------------------------------


def commit_together(parts: Sequence[TogetherPart]) -> dict[str, int | None]:
    """``CommitDriver(commit_together=...)`` for Iceberg tables: each part's group
    committed as :func:`commit_checkpoint` does, under its committer's job and operator
    ids, on its target's branch with its snapshot properties. Tables of different
    catalog objects commit one by one."""
    checkpoints = [_checkpoint_of(committer, group) for _, committer, group in parts]
    results = commit_checkpoint(checkpoints)
    return {name: results[c.name] for (name, _, _), c in zip(parts, checkpoints, strict=True)}


def _checkpoint_of(committer: FilesCommitter, group: CommitGroup) -> TableCheckpoint:
    target = committer.target
    if not isinstance(target, IcebergTarget):
        raise ValidationError(
            f"sink {committer.operator_id}: only Iceberg tables commit together here"
        )
    who = SinkIdentity(
        committer.job_id,
        committer.operator_id,
        target.branch,
        target.snapshot_properties,
        target.event_time_column,
    )
    return TableCheckpoint(target.table, group, who, committer.metrics, target.positions)


def log_commit_mode(catalog: Catalog, sink_id: str) -> bool:
    """Say once (at start) how ``sink_id``'s checkpoints reach its tables in ``catalog``;
    True when in one transaction."""
    problem = atomic_commit_problem(catalog)
    if problem is None:
        log.info(
            "sink %s: each checkpoint commits all its tables in one transaction of catalog %r",
            sink_id,
            catalog.name,
        )
        return True
    log.warning(
        "sink %s: tables commit one after another, so a reader may see them at different "
        "checkpoints (`stream-sink table consistent` reads them at one): %s",
        sink_id,
        problem,
    )
    return False
