"""The FilesCommitter: two-phase commit of streamed files into a table, whatever its
format: everything format-specific sits behind :class:`~.target.CommitTarget` (Iceberg:
:class:`~.iceberg.target.IcebergTarget`; Delta Lake: :class:`~.delta.target.DeltaTarget`).

Protocol (the steps below; recovery as users see it: ``docs/operations.md``, "Restarts"):
1. ``process(batch, result)``: a replay (batch at or below the watermark, or already in
   state) deletes the result's files and changes nothing; otherwise ``pending/<batch>``
   is written durably before returning.
2. ``snapshot_state(ckpt)``: stage (target) every pending batch up to ``ckpt``,
   then ONE atomic state write: put ``staged/<ckpt>``, delete the consumed pending.
3. ``complete_checkpoint(ckpt)``: ``checkpoints/<sink>/chk-<ckpt>/_metadata``.
4. ``notify_checkpoint_complete(ckpt)``: commit every staged checkpoint up to ``ckpt``
   (shapes: :mod:`.shapes`), each commit validated against the watermark on the
   refreshed table; then remove the staged entries, then the staging artifacts.
5. ``restore()``: finish what the previous run of this state left (under ITS job id),
   then continue under the current job id at its own watermark.

Invariants: every batch id in state is above the (job's) committed watermark; state
only changes through atomic, durable write batches; a batch is committed at most once
per (job, operator, branch) whatever crashes or races happen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Generic

from stream_sink.checkpoints import CheckpointMetadata, CheckpointStorage, CompletedCheckpoint
from stream_sink.exceptions import (
    DataLossError,
    InvalidOptionError,
    MissingFileError,
    SourcePositionError,
    StreamSinkError,
    ValidationError,
)
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.state import META_JOB_ID, OperatorStateBackend, StateWriteBatch
from stream_sink.state.layout import validate_sink_id

from . import committer_state
from .failpoints import (
    AFTER_CHECKPOINT_METADATA,
    AFTER_PENDING_WRITE,
    AFTER_STAGED_WRITE,
    AFTER_STAGING_MANIFESTS,
    AFTER_STATE_CLEANUP,
    AFTER_TABLE_COMMIT,
    BETWEEN_BATCH_COMMITS,
    failpoint,
)
from .file_check import missing_staging_manifest, require_files
from .identity import (
    META_TABLE,
    refuse_location_of_other_tables,
    refuse_other_table,
    stored_identity,
)
from .io_context import NOT_ACKNOWLEDGED, RESTORE, STILL_PENDING, STILL_STAGED, in_step
from .loss_check import (
    META_COVERED,
    META_SKIPPED,
    Accounting,
    HadInput,
    Skipped,
    check_lost_state,
    check_stale_state,
    covered_batch,
    encode_covered,
    skipped_batches,
)
from .shapes import COMMIT_MODES, CommitGroup, CommitMode, StagedBatch, empty_group, plan_commits
from .source_position import BatchOffsets, OffsetSource, ResumePoint, check_resume
from .state_recovery import OpenedState, StateDirectory, open_committer_state
from .target import (
    INITIAL_WATERMARK,
    MAX_CONTINUOUS_EMPTY_COMMITS,
    BatchFiles,
    CommitTarget,
    Handle,
    StagingNamer,
    new_instance_token,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_CONTINUOUS_EMPTY_COMMITS = 10


@dataclass(frozen=True)
class PlannedCommit:
    """One table's commit of its staged checkpoints, planned and not yet made
    (:meth:`FilesCommitter.plan_checkpoint`): the snapshots to make (``groups``, empty
    when there is nothing to commit) and what the state forgets once they are made."""

    checkpoint_ids: tuple[int, ...]
    job_id: str
    batches: tuple[StagedBatch, ...]
    stamp: int
    table_mark: int
    groups: tuple[CommitGroup, ...]


META_STAGING_TOKEN = "staging-token"
"""State metadata naming this state's staging artifacts (see StagingNamer)."""


class FilesCommitter(Generic[Handle]):
    """Commits the WriteResults of micro-batches exactly once (see module docstring).

    ``target`` is the table behind the target interface. ``state`` is an open backend
    (owned by the caller) or a :class:`StateDirectory` the committer opens in
    :meth:`restore` and closes in :meth:`close`. ``clock`` returns seconds and is used
    for metrics and checkpoint timestamps.
    """

    def __init__(
        self,
        target: CommitTarget[Handle],
        state: OperatorStateBackend | StateDirectory,
        checkpoint_storage: CheckpointStorage | None,
        *,
        job_id: str,
        operator_id: str,
        mode: CommitMode = "append",
        max_continuous_empty_commits: int | None = None,
        clock: Callable[[], float] = time.time,
        offsets: OffsetSource | None = None,
        resume: ResumePoint | None = None,
    ) -> None:
        if mode not in COMMIT_MODES:
            raise InvalidOptionError(f"commit mode must be one of {COMMIT_MODES}, got {mode!r}")
        if not job_id:
            raise InvalidOptionError("job id must be non-empty")
        if not isinstance(target, CommitTarget):
            raise InvalidOptionError(
                f"FilesCommitter needs a CommitTarget (e.g. IcebergTarget(table)), got "
                f"{type(target).__name__}"
            )
        self.target: CommitTarget[Handle] = target
        self.job_id = job_id
        self.operator_id = validate_sink_id(operator_id)
        self.mode: CommitMode = mode
        self._max_empty = _max_empty_commits(target, max_continuous_empty_commits)
        self._clock = clock
        self._state_source = state
        self._identity = target.identity()
        self._had_input: HadInput = _read_input
        self._storage = checkpoint_storage
        self._opened: OpenedState | None = None
        self._namer = StagingNamer(job_id, self.operator_id, new_instance_token())
        self.metrics = CommitterMetrics(clock)
        self._watermark = INITIAL_WATERMARK
        self._pending: list[int] = []  # ascending batch ids of pending/<batch>
        self._staged: dict[int, tuple[int, ...]] = {}  # checkpoint id -> its batch ids
        self._staged_files: dict[int, list[StagedBatch]] = {}  # what this instance staged
        self._empty_checkpoints = 0
        self._offsets = offsets
        self._resume = resume

    # --- properties ---------------------------------------------------------------------

    @property
    def state(self) -> OperatorStateBackend:
        if self._opened is None:
            raise StreamSinkError(
                f"sink {self.operator_id}: call restore() before using the committer"
            )
        return self._opened.backend

    @property
    def watermark(self) -> int:
        """The highest batch id this committer knows to be covered for its job."""
        return self._watermark

    @property
    def pending_batch_ids(self) -> tuple[int, ...]:
        return tuple(self._pending)

    @property
    def staged_checkpoints(self) -> dict[int, tuple[int, ...]]:
        return dict(self._staged)

    def uncommitted_paths(self) -> frozenset[str]:
        """Every file of the batches in state that the table does not hold yet (pending and
        staged): what orphan cleanup must never delete (staging artifacts are recognised
        by their names).

        Called from the in-sink maintenance thread while the sink's thread processes and
        commits: it walks copies of the pending and staged ids (pending first, so a batch
        staged in between is found among the staged), and a checkpoint committed while
        it is read, its staging artifacts already released, is skipped: its files are in
        the table by then."""
        paths: set[str] = set()
        for batch_id in tuple(self._pending):
            raw = self.state.get(committer_state.pending_key(batch_id))
            if raw:
                paths.update(self.target.decode(raw).all_paths())
        for ckpt in tuple(self._staged):
            try:
                batches = self._read_staged(ckpt)
            except MissingFileError:
                if ckpt in self._staged:
                    raise
                continue
            for b in batches:
                paths.update(b.files.all_paths())
        return frozenset(paths)

    def _step(self, step: str, assurance: str) -> AbstractContextManager[None]:
        return in_step(self.operator_id, self.target.name, step, assurance)

    # --- 1. process ---------------------------------------------------------------------

    def process(self, batch_id: int, result: BatchFiles) -> bool:
        """Record ``result`` of ``batch_id`` durably; False (and its files deleted) for a
        replay. Must return before the batch is acknowledged upstream."""
        state = self.state
        if self.mode == "overwrite" and result.delete_files:
            raise ValidationError(
                f"sink {self.operator_id}: overwrite mode cannot take delete files; batch "
                f"{batch_id} carries {len(result.delete_files)}"
            )
        if self._is_replay(batch_id):
            self._drop_replay(batch_id, result)
            return False
        highest = self._highest_recorded()
        if batch_id < highest:
            raise ValidationError(
                f"sink {self.operator_id}: batch {batch_id} arrives after batch {highest} was "
                "recorded; batch ids must increase"
            )
        with self._step(f"batch {batch_id}: recording it in the operator state", NOT_ACKNOWLEDGED):
            state.put(committer_state.pending_key(batch_id), result.to_bytes())
        self._pending.append(batch_id)
        failpoint(AFTER_PENDING_WRITE)
        return True

    def holds(self, batch_id: int) -> bool:
        """True when ``batch_id`` is covered by the watermark or recorded in state."""
        return self._is_replay(batch_id)

    def _is_replay(self, batch_id: int) -> bool:
        if batch_id <= self._watermark or batch_id in self._pending:
            return True
        return any(batch_id in batches for batches in self._staged.values())

    def _highest_recorded(self) -> int:
        return max([self._watermark, *self._pending, *self._staged], default=INITIAL_WATERMARK)

    def _drop_replay(self, batch_id: int, result: BatchFiles) -> None:
        keep = self._stored_paths(batch_id)
        log.info(
            "sink %s: batch %d is a replay; deleting its new files", self.operator_id, batch_id
        )
        for path in result.all_paths():
            if path not in keep:
                try:
                    self.target.delete_file(path)
                except Exception as e:  # an orphan is harmless; never fail the batch
                    log.warning("could not delete replayed file %s: %s", path, e)

    def _stored_paths(self, batch_id: int) -> set[str]:
        """Paths the state already records for ``batch_id`` (never deleted as replays)."""
        if batch_id in self._pending:
            raw = self.state.get(committer_state.pending_key(batch_id))
            return set(self.target.decode(raw).all_paths()) if raw else set()
        for ckpt, batches in self._staged.items():
            if batch_id in batches:
                for b in self._read_staged(ckpt):
                    if b.batch_id == batch_id:
                        return set(b.files.all_paths())
        return set()

    # --- 2. snapshot_state ------------------------------------------------------------------

    def snapshot_state(self, checkpoint_id: int) -> None:
        """Phase 1: stage every pending batch up to ``checkpoint_id`` (see module doc)."""
        with self._step(f"checkpoint {checkpoint_id}: staging its batches", STILL_PENDING):
            self._snapshot_state(checkpoint_id)

    def _snapshot_state(self, checkpoint_id: int) -> None:
        started = time.perf_counter()
        state = self.state
        batch_ids = [b for b in self._pending if b <= checkpoint_id]
        if checkpoint_id <= self._watermark and not batch_ids:
            return
        staged: list[tuple[int, bytes]] = []
        known: list[StagedBatch] | None = [] if checkpoint_id not in self._staged else None
        if checkpoint_id in self._staged:
            where = f"sink {self.operator_id}, staged checkpoint {checkpoint_id}"
            existing = state.get(committer_state.staged_key(checkpoint_id)) or b""
            staged.extend(committer_state.decode_staged(existing, where=where))
        for batch_id in batch_ids:
            raw = state.get(committer_state.pending_key(batch_id))
            if raw is None:
                raise StreamSinkError(f"sink {self.operator_id}: pending batch {batch_id} vanished")
            batch = self._stage_batch(checkpoint_id, batch_id, raw)
            staged.append((batch_id, batch.payload))
            if known is not None:
                known.append(batch)
        failpoint(AFTER_STAGING_MANIFESTS)
        write = StateWriteBatch().put(
            committer_state.staged_key(checkpoint_id), committer_state.encode_staged(staged)
        )
        for batch_id in batch_ids:
            write.delete(committer_state.pending_key(batch_id))
        state.write(write)
        self._pending = [b for b in self._pending if b > checkpoint_id]
        self._staged[checkpoint_id] = tuple(b for b, _ in staged)
        self._staged_files.pop(checkpoint_id, None)
        if known is not None:
            self._staged_files[checkpoint_id] = known
        failpoint(AFTER_STAGED_WRITE)
        self.metrics.checkpoint_duration((time.perf_counter() - started) * 1000)

    def _stage_batch(self, checkpoint_id: int, batch_id: int, raw: bytes) -> StagedBatch:
        result = self.target.decode(raw)
        payload = b""
        if not result.is_empty:
            payload = self.target.stage(self._namer, checkpoint_id, batch_id, result)
        return StagedBatch(checkpoint_id, batch_id, payload, result)

    # --- 3. complete_checkpoint -------------------------------------------------------------

    def complete_checkpoint(self, checkpoint_id: int) -> None:
        """Write ``chk-<checkpoint_id>/_metadata`` (with a snapshot of the state)."""
        if self._storage is None:
            return
        batch_ids = self._staged.get(checkpoint_id, ())
        metadata = CheckpointMetadata(
            checkpoint_id=checkpoint_id,
            job_id=self.job_id,
            sink_id=self.operator_id,
            first_batch_id=batch_ids[0] if batch_ids else checkpoint_id,
            last_batch_id=checkpoint_id,
            batch_ids=batch_ids,
            created_ms=int(self._clock() * 1000),
            table=self._identity,
        )
        with self._step(
            f"checkpoint {checkpoint_id}: writing it under {self._storage.location}", STILL_STAGED
        ):
            self._storage.complete(checkpoint_id, metadata, self.state)
        failpoint(AFTER_CHECKPOINT_METADATA)

    # --- 4. notify_checkpoint_complete ------------------------------------------------------

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Phase 2: commit every staged checkpoint up to ``checkpoint_id``; a late or
        repeated notification (at or below the watermark) does nothing."""
        ready = sorted(c for c in self._staged if c <= checkpoint_id)
        if checkpoint_id <= self._watermark and not ready:
            log.info("sink %s: checkpoint %d already committed", self.operator_id, checkpoint_id)
            return
        if ready:  # at or below the watermark only when another instance committed them
            with self._step(f"checkpoint {checkpoint_id}: committing it", STILL_STAGED):
                self._commit_checkpoints(ready, self.job_id)

    def _commit_checkpoints(self, checkpoint_ids: list[int], job_id: str) -> None:
        """Commit the staged checkpoints (ascending) under ``job_id``, then clean up."""
        planned = self._plan(checkpoint_ids, job_id)
        for i, group in enumerate(planned.groups):
            if i:
                failpoint(BETWEEN_BATCH_COMMITS)
            self._commit_with_retry(group, job_id)
        self._finish(planned)

    # --- 4'. the same, with the last snapshot committed together with other tables' ----

    def plan_checkpoint(self, checkpoint_id: int) -> PlannedCommit | None:
        """Step 4 up to the table commit: what committing every staged checkpoint up to
        ``checkpoint_id`` takes (None: nothing, a late or repeated notification). The
        caller commits ``planned.groups``' last with other tables' (the others one by
        one first, :meth:`commit_leading`), then calls :meth:`finish_checkpoint`."""
        ready = sorted(c for c in self._staged if c <= checkpoint_id)
        if not ready:
            return None
        with self._step(f"checkpoint {checkpoint_id}: planning its commit", STILL_STAGED):
            return self._plan(ready, self.job_id)

    def commit_leading(self, planned: PlannedCommit) -> None:
        """Commit every group of ``planned`` but the last, one by one, as step 4 does."""
        for i, group in enumerate(planned.groups[:-1]):
            if i:
                failpoint(BETWEEN_BATCH_COMMITS)
            self._commit_with_retry(group, planned.job_id)

    def finish_checkpoint(self, planned: PlannedCommit, refused_at: int | None) -> None:
        """After the last group of ``planned`` was committed elsewhere (``refused_at`` as
        :meth:`CommitTarget.commit` returns it): what a refusal leaves is committed here,
        then the checkpoints are forgotten as step 4 does."""
        if planned.groups:
            self._after_commit(planned.groups[-1], refused_at, planned.job_id)
        self._finish(planned)

    def _plan(self, checkpoint_ids: list[int], job_id: str) -> PlannedCommit:
        table_mark = self.target.watermark(job_id, self.operator_id)
        restored = {c for c in checkpoint_ids if c not in self._staged_files}
        batches: list[StagedBatch] = []
        for ckpt in checkpoint_ids:
            batches.extend(self._read_staged(ckpt, committed_up_to=table_mark))
        live = [b for b in batches if b.batch_id > table_mark]
        require_files(
            self.target, self.operator_id, [b for b in live if b.checkpoint_id in restored]
        )
        stale = [b for b in batches if b.batch_id <= table_mark]
        if stale:
            self._discard(stale, job_id)
        stamp = max([*checkpoint_ids, *(b.batch_id for b in batches)])
        groups = self._groups(live, stamp) if stamp > table_mark else []
        return PlannedCommit(
            tuple(checkpoint_ids), job_id, tuple(batches), stamp, table_mark, tuple(groups)
        )

    def _finish(self, planned: PlannedCommit) -> None:
        job_id, stamp, table_mark = planned.job_id, planned.stamp, planned.table_mark
        if stamp > table_mark:
            failpoint(AFTER_TABLE_COMMIT)
        covered = max(stamp, table_mark)
        if job_id == self.job_id:
            covered = max(self._watermark, covered)
        self._forget_checkpoints(
            list(planned.checkpoint_ids), list(planned.batches), encode_covered(job_id, covered)
        )
        if job_id == self.job_id:
            self._watermark = covered

    def _groups(self, batches: list[StagedBatch], stamp: int) -> list[CommitGroup]:
        groups = plan_commits(batches, self.mode, stamp)
        if not groups:
            self._empty_checkpoints += 1
            if self._empty_checkpoints % self._max_empty != 0:
                log.info("sink %s: nothing to commit up to batch %d", self.operator_id, stamp)
                return []
            groups = [empty_group(stamp, batches)]
        self._empty_checkpoints = 0
        return [replace(g, offsets=self._batch_offsets(g.stamp)) for g in groups]

    def _batch_offsets(self, batch_id: int) -> BatchOffsets | None:
        """The query's end offsets of ``batch_id``, recorded with its commit (unknown
        when they cannot be read; None without an offset source)."""
        if self._offsets is None:
            return None
        try:
            return self._offsets.batch(batch_id)
        except Exception as e:  # recorded as unknown: never fails the commit
            log.warning(
                "sink %s: the end offsets of batch %d are not known (%s); the commit records "
                "them as unknown",
                self.operator_id,
                batch_id,
                e,
            )
            return BatchOffsets(batch_id, None)

    def _commit_with_retry(self, group: CommitGroup, job_id: str) -> None:
        """Commit ``group``; when the watermark refuses it, drop the batches it covers and
        commit the rest (another instance committed those)."""
        refused_at = self.target.commit(group, job_id, self.operator_id, self.metrics)
        self._after_commit(group, refused_at, job_id)

    def _after_commit(self, group: CommitGroup, refused_at: int | None, job_id: str) -> None:
        while refused_at is not None:
            covered = [b for b in group.batches if b.batch_id <= refused_at]
            self._discard(covered, job_id)
            rest = tuple(b for b in group.batches if b.batch_id > refused_at)
            if not rest or group.stamp <= refused_at:
                return
            group = replace(group, batches=rest)
            refused_at = self.target.commit(group, job_id, self.operator_id, self.metrics)

    def _discard(self, batches: list[StagedBatch], job_id: str) -> None:
        """Forget batches another commit covered: delete their files the table does not
        reference (never one it does)."""
        files = [b.files for b in batches if not b.files.is_empty]
        if not files:
            return
        low = min(b.batch_id for b in batches)
        deleted = self.target.delete_unreferenced(files, job_id, self.operator_id, low)
        log.warning(
            "sink %s: batches %s were already committed for job %s; deleted %d of their "
            "files that the table does not reference",
            self.operator_id,
            [b.batch_id for b in batches],
            job_id,
            len(deleted),
        )

    def _forget_checkpoints(
        self, checkpoint_ids: list[int], batches: list[StagedBatch], covered: bytes
    ) -> None:
        """Drop the committed checkpoints from state and record the batch they cover (in
        the same atomic write: empty batches leave no table version, only this record)."""
        write = StateWriteBatch().put_meta(META_COVERED, covered)
        for ckpt in checkpoint_ids:
            write.delete(committer_state.staged_key(ckpt))
        self.state.write(write)
        for ckpt in checkpoint_ids:
            self._staged.pop(ckpt, None)
            self._staged_files.pop(ckpt, None)
        failpoint(AFTER_STATE_CLEANUP)
        where = f"sink {self.operator_id}"
        self.target.release([b.payload for b in batches if b.payload], where=where)

    def _read_staged(
        self, checkpoint_id: int, committed_up_to: int | None = None
    ) -> list[StagedBatch]:
        """The batches of a staged checkpoint, with their files read back.

        Batches at or below ``committed_up_to`` may have lost their staging artifacts (a
        state restored from a checkpoint taken before they were committed and cleaned
        up): those read as having no files instead of failing.
        """
        mine = self._staged_files.get(checkpoint_id)  # staged by this instance: in memory
        if mine is not None:
            return list(mine)
        where = f"sink {self.operator_id}, staged checkpoint {checkpoint_id}"
        raw = self.state.get(committer_state.staged_key(checkpoint_id))
        if raw is None:
            return []
        out = []
        for batch_id, payload in committer_state.decode_staged(raw, where=where):
            committed = committed_up_to is not None and batch_id <= committed_up_to
            files = self.target.empty()
            if payload:
                try:
                    files = self.target.unstage(
                        payload, where=f"{where}, batch {batch_id}", committed=committed
                    )
                except MissingFileError as e:
                    raise missing_staging_manifest(
                        self.operator_id, self.target, checkpoint_id, batch_id, e
                    ) from e
            out.append(StagedBatch(checkpoint_id, batch_id, payload, files))
        return out

    # --- 5. restore ---------------------------------------------------------------------------

    def restore(
        self,
        acknowledged_batch_ids: Iterable[int] | None = None,
        had_input: HadInput | None = None,
        *,
        defer_commit: bool = False,
    ) -> None:
        """Open the state and finish what it holds (module docstring, step 5).

        ``acknowledged_batch_ids``: the batches upstream already acknowledged (Spark's
        commit log); ``had_input``: whether one of them read input (default: all did).
        Before anything is changed, every one that read input must be covered by the
        table's watermark or recorded in the state (see :mod:`.loss_check`); otherwise
        DataLossError (SkippedBatchError for batches the state records as skipped),
        whether the state was lost or is a stale copy. State or checkpoints of another
        table raise TableMismatchError (see :mod:`.identity`).

        ``defer_commit``: what an earlier run of this job left stays staged or pending
        (its replays are still recognised, its files still checked), for the caller to
        commit together with other tables' (:meth:`.driver.CommitDriver.commit_restored`);
        what another job left is finished here all the same.
        """
        self._had_input = had_input or _read_input
        if self._opened is not None:
            raise StreamSinkError(f"sink {self.operator_id}: restore() was already called")
        acked = None
        if acknowledged_batch_ids is not None:
            acked = sorted({int(b) for b in acknowledged_batch_ids})
        if self._storage is not None and self._identity is not None:
            refuse_other_table(
                self._storage.recorded_table(),
                self._identity,
                sink_id=self.operator_id,
                where=self._storage.location,
            )

        def check(location: str, checkpoint: CompletedCheckpoint | None) -> None:
            self._check_lost(location, checkpoint, acked)

        with self._step("restoring", RESTORE):
            opened = open_committer_state(
                self._state_source, self._storage, self.operator_id, check
            )
        self._opened = opened
        try:
            self._load_index()
            if not opened.lost:
                self._check_intact(opened.backend, acked)
            with self._step("restoring", RESTORE):
                self._recover(opened, defer_commit)
                self._record_identity(opened.backend)
        except BaseException:
            self.close()  # release the state (and its lock) so a new committer can retry
            raise

    def _check_intact(self, state: OperatorStateBackend, acked: list[int] | None) -> None:
        """Intact state: of this table, and holding every acknowledged batch it must."""
        if self._identity is not None:
            where = f"the operator state at {state.location}"
            refuse_other_table(
                stored_identity(state), self._identity, sink_id=self.operator_id, where=where
            )
        if acked is not None:
            check_stale_state(self._accounting(state), state.location, acked)

    def _check_lost(
        self, location: str, checkpoint: CompletedCheckpoint | None, acked: list[int] | None
    ) -> None:
        """Lost state, before the checkpoint is restored: refuse a checkpoint of another
        table, and acknowledged batches nothing accounts for (see :mod:`.loss_check`)."""
        identity, storage = self._identity, self._storage
        if checkpoint is not None and identity is not None:
            refuse_other_table(
                checkpoint.metadata.table,
                identity,
                sink_id=self.operator_id,
                where=checkpoint.location,
            )
        if acked is None:
            return
        try:
            check_lost_state(self._accounting(None), location, checkpoint, acked)
        except DataLossError:
            unknown = storage is not None and storage.recorded_table() is None
            if storage is not None and identity is not None and checkpoint is None and unknown:
                base = storage.location.rsplit("/", 1)[0]
                others = storage.other_sinks_tables()
                refuse_location_of_other_tables(
                    others, identity, sink_id=self.operator_id, where=base
                )
            raise

    def _accounting(self, state: OperatorStateBackend | None) -> Accounting:
        """What the table (and ``state``, when it is of this job) account for."""
        mark = self.target.watermark(self.job_id, self.operator_id)
        covered, known = INITIAL_WATERMARK, set()
        stored = state.get_meta(META_JOB_ID) if state is not None else None
        if state is not None and stored is not None and stored.decode("utf-8") == self.job_id:
            covered = covered_batch(state, self.job_id)
            known = set(self._pending) | {b for bs in self._staged.values() for b in bs}
        skipped = skipped_batches(state, self.job_id) if state is not None else None
        return Accounting(
            self.operator_id,
            self.target.name,
            self.job_id,
            mark,
            covered,
            known,
            skipped,
            self._had_input,
        )

    def record_skipped(self, batch_ids: Iterable[int], upstream: str | None = None) -> None:
        """Note durably that upstream (logging its batches at ``upstream``) ran
        ``batch_ids`` without handing them to the sink, so the next restore names them as
        skipped (:func:`.loss_check.skipped_batch_error`) rather than as lost state."""
        known = skipped_batches(self.state, self.job_id)
        ids = known.batch_ids | set(batch_ids)
        record = Skipped(self.job_id, frozenset(ids), upstream or known.upstream)
        self.state.put_meta(META_SKIPPED, record.to_bytes())

    def _record_identity(self, state: OperatorStateBackend) -> None:
        if self._identity is None:
            return
        if stored_identity(state) is None:
            state.put_meta(META_TABLE, self._identity.to_json().encode())
        if self._storage is not None and self._storage.recorded_table() is None:
            self._storage.record_table(self._identity)

    def _recover(self, opened: OpenedState, defer_commit: bool) -> None:
        self._namer = StagingNamer(self.job_id, self.operator_id, self._instance_token(opened))
        stored = opened.backend.get_meta(META_JOB_ID)
        old_job = stored.decode("utf-8") if stored else self.job_id
        resuming = self._resume is not None and self._resuming()
        if resuming and self._resume is not None and old_job == self._resume.job_id != self.job_id:
            self._abandon_job(old_job)
        if defer_commit and old_job == self.job_id:
            self._keep_job()
        else:
            self._finish_job(old_job)
        if old_job != self.job_id or stored is None:
            opened.backend.put_meta(META_JOB_ID, self.job_id.encode("utf-8"))
        self._watermark = self.target.watermark(self.job_id, self.operator_id)
        self.target.sweep(self._namer, self._staged_payloads(), where=f"sink {self.operator_id}")
        if self._storage is not None:
            self._storage.sweep_temporaries()

    def _resuming(self) -> bool:
        """With ``resume``: True when this job is to continue from the table's recorded
        position (it committed nothing yet), after checking that it may
        (:func:`.source_position.check_resume`, SourcePositionError); False once this
        job has committed (the continuation is under way)."""
        assert self._resume is not None
        if self.target.watermark(self.job_id, self.operator_id) != INITIAL_WATERMARK:
            log.info(
                "sink %s: job %s already continues from %s",
                self.operator_id,
                self.job_id,
                self._resume,
            )
            return False
        if self._offsets is None:
            raise SourcePositionError(
                f"sink {self.operator_id}: resume_from_table={self._resume} needs the query's "
                "offset log, which this front door does not give the committer"
            )
        position = check_resume(
            self._resume,
            self.target.source_position(self.operator_id),
            self._offsets.starting(),
            table=self.target.name,
            sink_id=self.operator_id,
            where=self._offsets.where,
        )
        log.warning(
            "sink %s: job %s continues job %s after its batch %d at offsets %s (the table's "
            "recorded position); what the operator state holds of job %s beyond it is dropped",
            self.operator_id,
            self.job_id,
            position.job_id,
            position.batch_id,
            position.offsets_json,
            position.job_id,
        )
        return True

    def _abandon_job(self, job_id: str) -> None:
        """Drop what the state holds of ``job_id`` (the job a resumed query continues):
        the new query reads again everything after the table's recorded position, so
        none of it may be committed. Its files the table does not reference are deleted."""
        mark = self.target.watermark(job_id, self.operator_id)
        batches: list[StagedBatch] = []
        for ckpt in sorted(self._staged):
            try:
                batches.extend(self._read_staged(ckpt, committed_up_to=mark))
            except StreamSinkError as e:  # its files stay as orphans
                log.warning(
                    "sink %s: staged checkpoint %d unreadable: %s", self.operator_id, ckpt, e
                )
        batches.extend(self._pending_batches())
        if batches:
            self._discard(batches, job_id)
        if self._staged or self._pending:
            write = StateWriteBatch()
            for ckpt in self._staged:
                write.delete(committer_state.staged_key(ckpt))
            for batch_id in self._pending:
                write.delete(committer_state.pending_key(batch_id))
            self.state.write(write)
        where = f"sink {self.operator_id}"
        self.target.release([b.payload for b in batches if b.payload], where=where)
        self._staged, self._staged_files, self._pending = {}, {}, []

    @staticmethod
    def _instance_token(opened: OpenedState) -> str:
        stored = None if opened.lost else opened.backend.get_meta(META_STAGING_TOKEN)
        if stored:
            return stored.decode("ascii")
        token = new_instance_token()
        opened.backend.put_meta(META_STAGING_TOKEN, token.encode("ascii"))
        return token

    def _staged_payloads(self) -> list[bytes]:
        """The staging payloads the state's staged checkpoints hold."""
        payloads: list[bytes] = []
        for ckpt in self._staged:
            raw = self.state.get(committer_state.staged_key(ckpt)) or b""
            where = f"sink {self.operator_id}, staged checkpoint {ckpt}"
            payloads.extend(p for _, p in committer_state.decode_staged(raw, where=where) if p)
        return payloads

    def _load_index(self) -> None:
        state = self.state
        self._pending = [
            committer_state.id_of(k, committer_state.PENDING_PREFIX)
            for k, _ in state.scan(committer_state.PENDING_PREFIX)
        ]
        self._staged = {}
        for key, raw in state.scan(committer_state.STAGED_PREFIX):
            ckpt = committer_state.id_of(key, committer_state.STAGED_PREFIX)
            where = f"sink {self.operator_id}, staged checkpoint {ckpt}"
            staged = committer_state.decode_staged(raw, where=where)
            self._staged[ckpt] = tuple(b for b, _ in staged)

    def _finish_job(self, job_id: str) -> None:
        """Commit under ``job_id`` everything the state holds above its watermark."""
        if self._staged:
            self._commit_checkpoints(sorted(self._staged), job_id)
        if not self._pending:
            return
        mark = self.target.watermark(job_id, self.operator_id)
        self._watermark = mark
        stale = [b for b in self._pending if b <= mark]
        if stale:
            self._drop_pending(stale, job_id)
        if self._pending:
            ckpt = self._pending[-1]
            require_files(self.target, self.operator_id, self._pending_batches())
            self.snapshot_state(ckpt)
            self._commit_checkpoints([ckpt], job_id)

    def _keep_job(self) -> None:
        """Deferred restore of this job's own state: pending batches the table already
        holds are dropped, the others' files must exist; nothing is committed."""
        mark = self.target.watermark(self.job_id, self.operator_id)
        self._watermark = mark
        stale = [b for b in self._pending if b <= mark]
        if stale:
            self._drop_pending(stale, self.job_id)
        require_files(self.target, self.operator_id, self._pending_batches())

    def _pending_batches(self) -> list[StagedBatch]:
        """The pending batches with their files (checkpoint id -1: not staged)."""
        out = []
        for batch_id in self._pending:
            raw = self.state.get(committer_state.pending_key(batch_id))
            files = self.target.decode(raw) if raw else self.target.empty()
            out.append(StagedBatch(-1, batch_id, b"", files))
        return out

    def _drop_pending(self, batch_ids: list[int], job_id: str) -> None:
        batches = []
        write = StateWriteBatch()
        for batch_id in batch_ids:
            raw = self.state.get(committer_state.pending_key(batch_id))
            files = self.target.decode(raw) if raw else self.target.empty()
            batches.append(StagedBatch(batch_id, batch_id, b"", files))
            write.delete(committer_state.pending_key(batch_id))
        self._discard(batches, job_id)
        self.state.write(write)
        self._pending = [b for b in self._pending if b not in set(batch_ids)]

    # --- close --------------------------------------------------------------------------

    def close(self) -> None:
        """Release the state when the committer opened it; staged work stays durable."""
        opened, self._opened = self._opened, None
        if opened is not None and opened.owned:
            opened.backend.close()

    def __enter__(self) -> FilesCommitter[Handle]:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _max_empty_commits(table: CommitTarget, explicit: int | None) -> int:
    if explicit is None:
        raw = table.properties.get(MAX_CONTINUOUS_EMPTY_COMMITS)
        try:
            explicit = int(raw) if raw is not None else DEFAULT_MAX_CONTINUOUS_EMPTY_COMMITS
        except ValueError:
            raise InvalidOptionError(
                f"table {table.name}: {MAX_CONTINUOUS_EMPTY_COMMITS}={raw!r} is not an integer"
            ) from None
    if explicit < 1:
        raise InvalidOptionError(
            f"table {table.name}: {MAX_CONTINUOUS_EMPTY_COMMITS} must be positive, got {explicit}"
        )
    return explicit


def _read_input(_batch_id: int) -> bool:
    """Without word from upstream, every batch read input (the loss checks' safe side)."""
    return True
