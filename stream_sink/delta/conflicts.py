"""Conflict checks of a transaction against the commits that won meanwhile (Delta's
OptimisticTransaction.checkForConflicts / ConflictChecker).

For each winning commit, in order:
- a protocol change -> ProtocolChangedError; a metadata change -> MetadataChangedError;
- added files matching what this transaction read -> ConcurrentAppendError. Which adds
  count depends on the isolation level: Serializable all data-changing adds,
  WriteSerializable (the default) all but those of blind appends, SnapshotIsolation none;
- a removed file this transaction read -> ConcurrentDeleteReadError, one it removes too
  -> ConcurrentDeleteDeleteError;
- a txn of an appId this transaction read -> ConcurrentTransactionError;
- a ``domainMetadata`` of a domain this transaction writes -> ConcurrentDomainMetadataError
  (PROTOCOL.md: a concurrent write of the same domain conflicts, for every user domain).
Hence a blind append never conflicts with another blind append.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from stream_sink.exceptions import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentDomainMetadataError,
    ConcurrentTransactionError,
    MetadataChangedError,
    ProtocolChangedError,
)

from .actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
)

IsolationLevel = Literal["Serializable", "WriteSerializable", "SnapshotIsolation"]
ISOLATION_LEVELS: tuple[IsolationLevel, ...] = (
    "Serializable",
    "WriteSerializable",
    "SnapshotIsolation",
)


@dataclass(frozen=True)
class ReadPredicate:
    """What a transaction read, as a test on files a concurrent commit adds."""

    description: str
    matches: Callable[[AddFile], bool]


@dataclass(frozen=True)
class ReadSet:
    """Everything a transaction's outcome depends on."""

    read_version: int
    files_read: frozenset[str] = frozenset()
    files_removed: frozenset[str] = frozenset()
    predicates: tuple[ReadPredicate, ...] = ()
    app_ids: frozenset[str] = frozenset()
    isolation: IsolationLevel = "WriteSerializable"
    domains: frozenset[str] = frozenset()
    """The domains the transaction writes."""


def check_for_conflicts(read: ReadSet, version: int, winning: Sequence[Action], where: str) -> None:
    """Raise a CommitConflictError when commit ``version`` (which won) conflicts."""
    at = f"{where}: concurrent commit {version}"
    blind = any(
        isinstance(a, CommitInfo) and a.values.get("isBlindAppend") is True for a in winning
    )
    for a in winning:
        if isinstance(a, Protocol):
            raise ProtocolChangedError(f"{at} changed the protocol; reload the table and retry")
        if isinstance(a, Metadata):
            raise MetadataChangedError(
                f"{at} changed the table metadata (schema, partitioning or configuration); "
                "reload the table and retry"
            )
        if isinstance(a, RemoveFile) and a.data_change:
            if a.path in read.files_read:
                raise ConcurrentDeleteReadError(
                    f"{at} removed {a.path}, which this transaction read"
                )
            if a.path in read.files_removed:
                raise ConcurrentDeleteDeleteError(
                    f"{at} removed {a.path}, which this transaction removes too"
                )
        if isinstance(a, Txn) and a.app_id in read.app_ids:
            raise ConcurrentTransactionError(
                f"{at} set transaction {a.app_id} to version {a.version}"
            )
        if isinstance(a, DomainMetadata) and a.domain in read.domains:
            raise ConcurrentDomainMetadataError(
                f"{at} wrote domain {a.domain!r}, which this transaction writes too"
            )
        if isinstance(a, AddFile) and a.data_change and _counts(read.isolation, blind):
            for p in read.predicates:
                if p.matches(a):
                    raise ConcurrentAppendError(
                        f"{at} added {a.path}, matching what this transaction read "
                        f"({p.description}); re-plan on the new version"
                    )


def _counts(isolation: IsolationLevel, blind_append: bool) -> bool:
    if isolation == "SnapshotIsolation":
        return False
    if isolation == "WriteSerializable":
        return not blind_append
    return True
