"""Optimistic transactions on a Delta table (Delta's OptimisticTransaction).

``commit()`` = prepare (protocol and appendOnly checks, validations on the read
snapshot), then try to write version read+1 put-if-absent; when another writer won that
version, check every winning commit for conflicts (:mod:`.conflicts`), move the snapshot
forward, re-run the validations on it and retry the next version, with exponential
backoff, up to ``max_attempts``. After the commit, a checkpoint is written when the
version is a multiple of ``delta.checkpointInterval`` (a failure there only logs), then
log entries older than ``delta.logRetentionDuration`` below a checkpoint are removed
(:mod:`.expired_logs`), and commit temporaries a killed writer left are removed
(:mod:`.log_cleanup`).

Domain metadata (:meth:`DeltaTransaction.set_domain`) is built per attempt, so its
configuration may name the version and commit time it lands at; :mod:`.domains` says
which domains may be written, :mod:`.conflicts` that a concurrent write of one conflicts.

Invariants: validations (e.g. the streaming watermark) run on the exact snapshot the
version is written on top of, after every refresh, so a commit that would duplicate
another writer's work never lands; the table is unchanged when commit() raises.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from stream_sink.exceptions import CommitFailedError, ConcurrentDeleteReadError
from stream_sink.retry import Backoff, TryAgain, is_try_again, retrying

from .actions import Action, AddFile, CommitInfo, DomainMetadata, RemoveFile, Txn
from .checkpoint import write_checkpoint
from .conflicts import IsolationLevel, ReadPredicate, ReadSet, check_for_conflicts
from .domains import check_domain_actions, written_domains
from .expired_logs import remove_expired_logs
from .features import check_removes_allowed, check_writable
from .log_cleanup import remove_stale_temporaries
from .snapshot import DeltaSnapshot, SnapshotBuilder

if TYPE_CHECKING:
    from .table import DeltaTable

log = logging.getLogger(__name__)

DEFAULT_MAX_ATTEMPTS = 20
MIN_BACKOFF_S = 0.005
MAX_BACKOFF_S = 1.0
ENGINE_INFO = "stream-sink"


class DeltaTransaction:
    """Collects actions and what they depend on, then commits them as one version."""

    def __init__(
        self,
        table: DeltaTable,
        isolation: IsolationLevel = "WriteSerializable",
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self._table = table
        self.read_snapshot = table.snapshot
        self._isolation: IsolationLevel = isolation
        self._max_attempts = max(1, max_attempts)
        self._actions: list[Action] = []
        self._files_read: set[str] = set()
        self._predicates: list[ReadPredicate] = []
        self._app_ids: set[str] = set()
        self._validations: list[Callable[[DeltaSnapshot], None]] = []
        self._before_publish: Callable[[], None] | None = None
        self._domains: dict[str, Callable[[int, int], str]] = {}

    # --- what the transaction read -------------------------------------------------------

    def read_files(self, paths: Iterable[str]) -> DeltaTransaction:
        """Declare files this transaction's output depends on (a concurrent remove fails)."""
        self._files_read.update(paths)
        return self

    def read_predicate(
        self, description: str, matches: Callable[[AddFile], bool]
    ) -> DeltaTransaction:
        """Declare data read by a predicate (a concurrent add matching it fails)."""
        self._predicates.append(ReadPredicate(description, matches))
        return self

    def read_app_id(self, app_id: str) -> int | None:
        """The txn version of ``app_id`` on the read snapshot; a concurrent txn of it fails."""
        self._app_ids.add(app_id)
        return self.read_snapshot.txn_version(app_id)

    # --- what it writes ------------------------------------------------------------------

    def add(self, *actions: Action) -> DeltaTransaction:
        self._actions.extend(actions)
        return self

    def add_all(self, actions: Iterable[Action]) -> DeltaTransaction:
        self._actions.extend(actions)
        return self

    def set_domain(self, domain: str, configuration: Callable[[int, int], str]) -> DeltaTransaction:
        """Write ``domainMetadata`` for ``domain``, its configuration made by
        ``configuration(version, timestamp_ms)`` of the attempt that lands."""
        self._domains[domain] = configuration
        return self

    def _domain_actions(self, version: int, timestamp_ms: int) -> list[DomainMetadata]:
        return [DomainMetadata(d, make(version, timestamp_ms)) for d, make in self._domains.items()]

    def validate(self, check: Callable[[DeltaSnapshot], None]) -> DeltaTransaction:
        """Run ``check`` on the snapshot the commit is written on top of, every attempt."""
        self._validations.append(check)
        return self

    def before_publish(self, hook: Callable[[], None]) -> DeltaTransaction:
        """Run ``hook`` after the version's bytes are durable and before they are visible."""
        self._before_publish = hook
        return self

    # --- commit ----------------------------------------------------------------------------

    def commit(self, operation: str = "WRITE", parameters: Mapping[str, Any] | None = None) -> int:
        """Commit as one new version; returns it. Raises CommitConflictError (a winning
        commit conflicts), CommitValidationError (a validation refused) or
        CommitFailedError (out of attempts)."""
        table = self._table
        where = f"Delta table {table.location}"
        snapshot = self.read_snapshot
        self._prepare(snapshot, where)
        read = ReadSet(
            snapshot.version,
            frozenset(self._files_read),
            self._removed_paths(),
            tuple(self._predicates),
            frozenset(self._app_ids),
            self._isolation,
            frozenset(self._domains) | written_domains(self._actions),
        )
        txn_id = str(uuid.uuid4())  # our bytes differ from any other writer's (S3 retries)

        def attempt(n: int) -> int:
            nonlocal snapshot
            version = snapshot.version + 1
            now = int(time.time() * 1000)
            info = self._commit_info(operation, parameters, n, txn_id, now)
            actions = [info, *self._actions, *self._domain_actions(version, now)]
            if table.log.write_commit(version, actions, self._before_publish):
                table.record_commit(SnapshotBuilder.of(snapshot).apply(version, actions).build())
                self._post_commit(version)
                return version
            snapshot = self._rebase(snapshot, read, where)
            raise TryAgain(f"lost version {version}")

        backoff = Backoff(MIN_BACKOFF_S, MAX_BACKOFF_S, self._max_attempts, jitter=(0.5, 1.5))
        try:
            return retrying(attempt, backoff, is_try_again)
        except TryAgain:
            raise CommitFailedError(
                f"{where}: gave up after {self._max_attempts} attempts; "
                "other writers kept winning each version"
            ) from None

    def _prepare(self, snapshot: DeltaSnapshot, where: str) -> None:
        check_writable(snapshot.protocol, where, snapshot.metadata.schema_string)
        domains = [*self._actions, *(DomainMetadata(d, "") for d in self._domains)]
        check_domain_actions(domains, snapshot.protocol, where)
        if any(isinstance(a, RemoveFile) and a.data_change for a in self._actions):
            check_removes_allowed(snapshot.configuration, where)
        self._check_removes_live(snapshot, where)
        for check in self._validations:
            check(snapshot)

    def _check_removes_live(self, snapshot: DeltaSnapshot, where: str) -> None:
        """Every file this transaction removes must still be live: actions planned on an
        older version (a MERGE staged before a commit) whose files another commit removed
        since would otherwise bring the rewritten rows back."""
        for a in self._actions:
            if not (isinstance(a, RemoveFile) and a.data_change):
                continue
            live = snapshot.files.get(a.path)
            if live is None or live.dv_id != a.dv_id:
                raise ConcurrentDeleteReadError(
                    f"{where}: {a.path} is no longer live at version {snapshot.version} (with the "
                    "deletion vector this change read); it was removed or had rows deleted "
                    "after this change was planned (re-plan on the new version)"
                )

    def _removed_paths(self) -> frozenset[str]:
        return frozenset(a.path for a in self._actions if isinstance(a, RemoveFile))

    def _rebase(self, snapshot: DeltaSnapshot, read: ReadSet, where: str) -> DeltaSnapshot:
        """Apply the commits that won since ``snapshot``: validations first (so a racing
        writer of the same appId sees the watermark refusal), then conflicts."""
        log_ = self._table.log
        builder = SnapshotBuilder.of(snapshot)
        winners: list[tuple[int, list[Action]]] = []
        newest = log_.list_commits()[-1]
        for v in range(snapshot.version + 1, newest + 1):
            actions = log_.read_commit(v)
            winners.append((v, actions))
            builder.apply(v, actions)
        rebased = builder.build()
        for check in self._validations:
            check(rebased)
        for v, actions in winners:
            check_for_conflicts(read, v, actions, where)
        self._check_removes_live(rebased, where)
        log.info(
            "%s: lost version %d to another writer; retrying at %d",
            where,
            snapshot.version + 1,
            rebased.version + 1,
        )
        return rebased

    def _commit_info(
        self,
        operation: str,
        parameters: Mapping[str, Any] | None,
        attempt: int,
        txn_id: str,
        now_ms: int,
    ) -> CommitInfo:
        blind = (
            not self._files_read
            and not self._predicates
            and all(isinstance(a, AddFile | Txn | DomainMetadata) for a in self._actions)
        )
        return CommitInfo(
            {
                "timestamp": now_ms,
                "operation": operation,
                "operationParameters": {k: str(v) for k, v in (parameters or {}).items()},
                "readVersion": self.read_snapshot.version,
                "isolationLevel": self._isolation,
                "isBlindAppend": blind,
                "engineInfo": ENGINE_INFO,
                "txnId": txn_id,
                "operationMetrics": {"numAttempts": str(attempt + 1)},
            }
        )

    def _post_commit(self, version: int) -> None:
        remove_stale_temporaries(self._table.log, version)
        snapshot = self._table.snapshot
        if version == 0 or version % snapshot.checkpoint_interval != 0:
            return
        try:
            write_checkpoint(self._table.log, snapshot)
        except Exception as e:  # a checkpoint is an optimization; the commit stands
            log.warning(
                "Delta table %s: checkpoint of version %d failed: %s",
                self._table.location,
                version,
                e,
            )
            return
        remove_expired_logs(self._table.log, snapshot.metadata.configuration)
