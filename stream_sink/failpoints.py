"""Named crash points at the step boundaries of the commit protocol and of
maintenance (rewrites, expiry).

The primitive lives at the bottom of the package so that every layer (the table
format's operations, the committer, maintenance) can mark its steps.

``STREAM_SINK_FAILPOINT=<name>[@<n>][,<name>[@<n>]...]`` kills the process with SIGKILL
(no cleanup, no flush, no ``finally``) the n-th time (default: the first) the named
point is reached. The variable is parsed once and cached; with it unset a failpoint is
one dictionary lookup on an empty dict. A *fault point* (``lost-tables-answer``) arms the same way
but does not kill: :func:`fault` tells its caller to act the fault out (a lost answer),
so the process must recover from it in the same run. Recovery tests enable each point in turn and
prove the table holds every change exactly once after a restart.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from stream_sink.exceptions import InvalidOptionError

ENV_VAR = "STREAM_SINK_FAILPOINT"

AFTER_DATA_FILES = "after-data-files"
AFTER_PENDING_WRITE = "after-pending-write"
AFTER_STAGING_MANIFESTS = "after-staging-manifests"
AFTER_STAGED_WRITE = "after-staged-write"
AFTER_CHECKPOINT_METADATA = "after-checkpoint-metadata"
AFTER_METADATA_FILE_WRITE = "after-metadata-file-write"
AFTER_TABLE_COMMIT = "after-table-commit"
AFTER_STATE_CLEANUP = "after-state-cleanup"
BETWEEN_BATCH_COMMITS = "between-batch-commits"

# the commit of several tables in one catalog transaction (commit.iceberg.multi_table)
AFTER_TABLES_METADATA_WRITE = "after-tables-metadata-write"
INSIDE_TABLES_SWAP = "inside-tables-swap"
AFTER_TABLES_COMMIT = "after-tables-commit"
LOST_TABLES_ANSWER = "lost-tables-answer"

# maintenance (table operations and the maintenance actions)
AFTER_REWRITE_FILES = "after-rewrite-files"
BEFORE_REWRITE_SWAP = "before-rewrite-swap"
AFTER_REWRITE_COMMIT = "after-rewrite-commit"
AFTER_EXPIRE_METADATA = "after-expire-metadata"
AFTER_EXPIRE_FILES = "after-expire-files"

FAILPOINTS: tuple[str, ...] = (
    AFTER_DATA_FILES,
    AFTER_PENDING_WRITE,
    AFTER_STAGING_MANIFESTS,
    AFTER_STAGED_WRITE,
    AFTER_CHECKPOINT_METADATA,
    AFTER_METADATA_FILE_WRITE,
    AFTER_TABLE_COMMIT,
    AFTER_STATE_CLEANUP,
    BETWEEN_BATCH_COMMITS,
)
"""Every failpoint of the commit protocol, in protocol order. ``after-data-files`` is
reached by the Spark adapter (data files written, WriteResult not yet handed to the
committer)."""

MULTI_TABLE_FAILPOINTS: tuple[str, ...] = (
    AFTER_TABLES_METADATA_WRITE,
    INSIDE_TABLES_SWAP,
    AFTER_TABLES_COMMIT,
    LOST_TABLES_ANSWER,
)
"""Crash and fault points of a checkpoint committed to several tables at once:
``after-tables-metadata-write`` (every table's snapshot and, for the SQL catalog, its
new metadata file written; no pointer moved), ``inside-tables-swap`` (reached after
each table's pointer moved inside the still-open database transaction: a kill there
rolls every table back), ``after-tables-commit`` (the transaction committed, nothing
of it recorded by the sink yet), ``lost-tables-answer`` (a fault point: the transaction
committed and its answer is lost, as a dropped connection loses it; the sink gets an
unknown outcome and must settle it by reading every table back)."""

MAINTENANCE_FAILPOINTS: tuple[str, ...] = (
    AFTER_REWRITE_FILES,
    BEFORE_REWRITE_SWAP,
    AFTER_REWRITE_COMMIT,
    AFTER_EXPIRE_METADATA,
    AFTER_EXPIRE_FILES,
)
"""Crash points of maintenance: ``after-rewrite-files`` (a compaction's new files
written, nothing committed; reached by the caller of a rewrite),
``before-rewrite-swap`` (the rewrite's manifests, list and metadata file written,
the catalog pointer not swapped), ``after-rewrite-commit`` (swapped),
``after-expire-metadata`` (expired snapshots gone from the metadata, no file
deleted), ``after-expire-files`` (data and delete files deleted, manifests and
manifest lists not yet)."""

AFTER_SCHEMA_CHANGE = "after-schema-change"
"""Reached by the Spark adapter once a batch's schema change is committed and before any
of its files is written (``IcebergSink(schema_evolution=...)``)."""

AFTER_POSITION_DELETES = "after-position-deletes"
"""Reached by a ``deletes="positions"`` commit once the batch's deletes are resolved and
its deletion vectors (Iceberg v3, Delta) or position delete files (Iceberg v2) are
written, before the table commit (:mod:`stream_sink.commit.iceberg.position_deletes`,
:mod:`stream_sink.delta.key_positions`)."""

AFTER_HELD_WRITE = "after-held-write"
"""Reached once a batch's held source transactions are durable in the operator state,
before any table records the batch's committed rows
(:mod:`stream_sink.commit.transactions.buffer`)."""

KNOWN_FAILPOINTS: tuple[str, ...] = (
    FAILPOINTS
    + MULTI_TABLE_FAILPOINTS
    + MAINTENANCE_FAILPOINTS
    + (AFTER_SCHEMA_CHANGE, AFTER_POSITION_DELETES, AFTER_HELD_WRITE)
)

_armed: dict[str, int] | None = None
"""name -> remaining hits before the kill; None until the environment is parsed."""
_fault_listeners: list[Callable[[str], None]] = []


def parse_failpoints(spec: str) -> dict[str, int]:
    """``"a@2,b"`` -> ``{"a": 2, "b": 1}``; unknown names and bad counts are refused."""
    armed: dict[str, int] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, _, count = part.partition("@")
        if name not in KNOWN_FAILPOINTS:
            raise InvalidOptionError(
                f"{ENV_VAR}: unknown failpoint {name!r}; known: {', '.join(KNOWN_FAILPOINTS)}"
            )
        try:
            n = int(count) if count else 1
        except ValueError:
            raise InvalidOptionError(f"{ENV_VAR}: {part!r} must be <name>@<positive int>") from None
        if n < 1:
            raise InvalidOptionError(f"{ENV_VAR}: {part!r} must be <name>@<positive int>")
        armed[name] = n
    return armed


def failpoint(name: str) -> None:
    """Reach the failpoint ``name``: kill the process here if it is armed for this hit."""
    armed = _armed if _armed is not None else _load()
    if not armed:
        return
    remaining = armed.get(name)
    if remaining is None:
        return
    if remaining > 1:
        armed[name] = remaining - 1
        return
    os.kill(os.getpid(), signal.SIGKILL)


def fault(name: str) -> bool:
    """Reach the fault point ``name``: True when it is armed for this hit, once (the
    caller then acts the fault out); every listener hears of it first."""
    armed = _armed if _armed is not None else _load()
    remaining = armed.get(name) if armed else None
    if remaining is None:
        return False
    if remaining > 1:
        armed[name] = remaining - 1
        return False
    del armed[name]
    for listener in _fault_listeners:
        listener(name)
    return True


def on_fault(listener: Callable[[str], None]) -> None:
    """Call ``listener(name)`` whenever a fault point is acted out in this process."""
    _fault_listeners.append(listener)


def reset_failpoints(spec: str | None = None) -> None:
    """Forget the cached configuration: re-read the environment on the next hit, or,
    with ``spec``, arm exactly those points now (tests)."""
    global _armed
    _armed = None if spec is None else parse_failpoints(spec)


def _load() -> dict[str, int]:
    global _armed
    _armed = parse_failpoints(os.environ.get(ENV_VAR, ""))
    return _armed
