"""A Delta sink's table as ``stream-sink status`` reports it: version, live files, the
watermark (the ``txn`` of the sink's appId) and the version that last committed it.

The table is the one the sink recorded (its location and ``metaData`` id, with the
store's settings that are not credentials: ``DeltaTarget.identity``); credentials come
from the caller (``--catalog-property s3.access-key-id=...``) or the environment.

Invariant: read-only; a table that cannot be read, or whose ``metaData`` id is not the
recorded one, gives no watermark (None) and the reason, never an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stream_sink.checkpoints import TableIdentity
from stream_sink.commit.delta.source_position import sink_position
from stream_sink.commit.delta.target import app_id, committed_watermark
from stream_sink.commit.source_position import SourcePosition
from stream_sink.commit.target import INITIAL_WATERMARK
from stream_sink.delta import DeltaTable
from stream_sink.delta.actions import CommitInfo, Txn
from stream_sink.exceptions import StreamSinkError

LAST_COMMIT_SEARCH = 100
"""Versions read back from the newest to find the sink's last commit (versions after
it are maintenance's or other writers'); beyond, the last commit is not named."""


@dataclass(frozen=True)
class DeltaTableState:
    """What the Delta table holds now."""

    location: str
    version: int
    files: int
    bytes: int


@dataclass(frozen=True)
class LastCommit:
    """The newest commit carrying a sink's watermark (of either target)."""

    snapshot_id: int
    """The Iceberg snapshot; a Delta table's version."""
    timestamp_ms: int
    watermark: int


@dataclass(frozen=True)
class DeltaWatermark:
    """The sink's watermark in the table (None: unknown, ``error`` says why)."""

    watermark: int | None
    error: str | None
    table: DeltaTableState | None = None
    last_commit: LastCommit | None = None
    position: SourcePosition | None = None
    """The source position the sink's last commit recorded (None: none)."""


def delta_watermark(
    identity: TableIdentity,
    query_id: str,
    sink_id: str,
    storage_options: Mapping[str, str] | None = None,
) -> DeltaWatermark:
    """The watermark of (``query_id``, ``sink_id``) in the Delta table ``identity``
    names; ``storage_options`` add to (and override) the recorded settings."""
    settings = dict(identity.catalog_settings or {})
    location = settings.pop("location", identity.table)
    settings.pop("type", None)
    settings.update(storage_options or {})
    try:
        table = DeltaTable.load(location, storage_options=settings)
    except (StreamSinkError, OSError) as e:
        return DeltaWatermark(
            None,
            f"cannot read the Delta table {location} the sink recorded: {e} (pass "
            "--catalog-property s3.…=… for its store's credentials, or --table PATH if it "
            "moved)",
        )
    snapshot = table.snapshot
    if snapshot.metadata.id != identity.table_uuid:
        return DeltaWatermark(
            None,
            f"the Delta table at {location} is not the table this sink wrote: its id is "
            f"{snapshot.metadata.id}, the sink recorded {identity.table_uuid} (was it "
            "deleted and created again? pass --table PATH of the sink's table)",
        )
    mark = committed_watermark(snapshot, query_id, sink_id)
    state = DeltaTableState(
        location,
        snapshot.version,
        len(snapshot.files),
        sum(a.size for a in snapshot.files.values()),
    )
    last = _last_commit(table, app_id(query_id, sink_id)) if mark != INITIAL_WATERMARK else None
    return DeltaWatermark(mark, None, state, last, sink_position(table.log, sink_id, snapshot))


def _last_commit(table: DeltaTable, app: str) -> LastCommit | None:
    """The newest version (of the last :data:`LAST_COMMIT_SEARCH`) with ``app``'s txn."""
    newest = table.version
    kept = set(table.log.list_commits())
    for version in range(newest, max(-1, newest - LAST_COMMIT_SEARCH), -1):
        if version not in kept:
            return None  # cleaned up (log retention): older versions are gone too
        actions = table.log.read_commit(version)
        txn = next((a for a in actions if isinstance(a, Txn) and a.app_id == app), None)
        if txn is None:
            continue
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        when = txn.last_updated or (_timestamp(info) if info is not None else 0)
        return LastCommit(version, when, txn.version)
    return None


def _timestamp(info: CommitInfo) -> int:
    value = info.values.get("timestamp")
    return value if isinstance(value, int) else 0
