"""Checkpoints (PROTOCOL.md "Checkpoints") and ``_last_checkpoint``.

Written: classic single-file Parquet checkpoints of the V1 spec (valid on every table,
``v2Checkpoint`` ones included). Read: those, multi-part ones, and V2 spec checkpoints
(UUID-named JSON or Parquet, or classic) with their ``_delta_log/_sidecars`` files.

A checkpoint at version v holds the reconciled state after v: protocol, metadata, the
latest ``txn`` per appId, the live ``domainMetadata`` per domain (a removed domain
leaves no row: replay from the checkpoint has none either), every live ``add`` and the
``remove`` tombstones younger than ``delta.deletedFileRetentionDuration``, one action
per row in the column named after it. Invariants: the checkpoint file is written
atomically before ``_last_checkpoint`` points at it; a checkpoint that cannot be decoded
raises CorruptMetadataError naming its version; a tombstone leaves the checkpoints once
it is past the retention, as in Delta's own checkpoints, so that a stream's checkpoints
stay the size of its live files rather than growing with every file it ever removed
(vacuum spares a file only for that retention too, and finds the files to delete by
listing).

Unlike commit files, both are plain overwrites (a rename over locally, a PUT on S3),
and that is safe: the checkpoint of version v is a function of the committed log up to
v, so two writers checkpointing v write the same state (up to tombstones that expired
between their writes, which no reader within the retention needs) and either copy is
right; each
write is atomic (a reader sees the old object or the whole new one); and
``_last_checkpoint`` is only a hint: readers list ``_delta_log`` and use the newest
checkpoint at or below the version they want, then the JSON commits after it, so a
hint left pointing at an older checkpoint by a slower writer costs time, not
correctness. A crash between the two writes leaves a checkpoint nothing points at yet,
which listing finds.
"""

from __future__ import annotations

import io as _io
import json
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.exceptions import CorruptMetadataError, MissingFileError

from .actions import Action, Metadata, Protocol, Sidecar, parse_action
from .expired_logs import deleted_file_retention_ms
from .log import DeltaLog, checkpoint_name
from .snapshot import DeltaSnapshot

_STR_MAP = pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string()))
_STR_MAP_NN = pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string(), False))
_FEATURES = pa.list_(pa.field("element", pa.string(), False))
_DV = pa.struct(
    [
        pa.field("storageType", pa.string(), False),
        pa.field("pathOrInlineDv", pa.string(), False),
        pa.field("offset", pa.int32()),
        pa.field("sizeInBytes", pa.int32(), False),
        pa.field("cardinality", pa.int64(), False),
    ]
)
_COLUMNS = (
    "checkpointMetadata",
    "protocol",
    "metaData",
    "txn",
    "domainMetadata",
    "add",
    "remove",
    "sidecar",
)

CHECKPOINT_SCHEMA = pa.schema(
    [
        pa.field(
            "txn",
            pa.struct(
                [
                    pa.field("appId", pa.string(), False),
                    pa.field("version", pa.int64(), False),
                    pa.field("lastUpdated", pa.int64()),
                ]
            ),
        ),
        pa.field(
            "add",
            pa.struct(
                [
                    pa.field("path", pa.string(), False),
                    pa.field("partitionValues", _STR_MAP, False),
                    pa.field("size", pa.int64(), False),
                    pa.field("modificationTime", pa.int64(), False),
                    pa.field("dataChange", pa.bool_(), False),
                    pa.field("stats", pa.string()),
                    pa.field("tags", _STR_MAP),
                    pa.field("deletionVector", _DV),
                ]
            ),
        ),
        pa.field(
            "remove",
            pa.struct(
                [
                    pa.field("path", pa.string(), False),
                    pa.field("deletionTimestamp", pa.int64()),
                    pa.field("dataChange", pa.bool_(), False),
                    pa.field("extendedFileMetadata", pa.bool_()),
                    pa.field("partitionValues", _STR_MAP),
                    pa.field("size", pa.int64()),
                    pa.field("deletionVector", _DV),
                ]
            ),
        ),
        pa.field(
            "metaData",
            pa.struct(
                [
                    pa.field("id", pa.string(), False),
                    pa.field("name", pa.string()),
                    pa.field("description", pa.string()),
                    pa.field(
                        "format",
                        pa.struct(
                            [
                                pa.field("provider", pa.string(), False),
                                pa.field("options", _STR_MAP_NN, False),
                            ]
                        ),
                        False,
                    ),
                    pa.field("schemaString", pa.string(), False),
                    pa.field("partitionColumns", _FEATURES, False),
                    pa.field("createdTime", pa.int64()),
                    pa.field("configuration", _STR_MAP_NN, False),
                ]
            ),
        ),
        pa.field(
            "protocol",
            pa.struct(
                [
                    pa.field("minReaderVersion", pa.int32(), False),
                    pa.field("minWriterVersion", pa.int32(), False),
                    pa.field("readerFeatures", _FEATURES),
                    pa.field("writerFeatures", _FEATURES),
                ]
            ),
        ),
        pa.field(
            "domainMetadata",
            pa.struct(
                [
                    pa.field("domain", pa.string(), False),
                    pa.field("configuration", pa.string(), False),
                    pa.field("removed", pa.bool_(), False),
                ]
            ),
        ),
    ]
)


def _rows(snapshot: DeltaSnapshot, now_ms: int) -> list[dict[str, Any]]:
    def row(name: str, body: dict[str, Any]) -> dict[str, Any]:
        return {name: body}

    out = [row("protocol", snapshot.protocol.to_json())]
    meta = snapshot.metadata.to_json()
    meta["configuration"] = list(meta["configuration"].items())
    meta["format"] = {"provider": "parquet", "options": []}
    out.append(row("metaData", meta))
    for txn in snapshot.txns.values():
        out.append(row("txn", txn.to_json()))
    for domain in snapshot.domains.values():
        out.append(row("domainMetadata", domain.to_json()))
    for add in snapshot.files.values():
        body = add.to_json()
        body["partitionValues"] = list(add.partition_values.items())
        body["tags"] = list(add.tags.items()) if add.tags else None
        out.append(row("add", body))
    horizon = now_ms - deleted_file_retention_ms(snapshot.configuration)
    for rm in snapshot.tombstones.values():
        if (rm.deletion_timestamp or 0) < horizon:
            continue  # past the retention: vacuum may have deleted the file already
        body = rm.to_json()
        body["partitionValues"] = list((rm.partition_values or {}).items()) or None
        out.append(row("remove", body))
    return out


def write_checkpoint(log: DeltaLog, snapshot: DeltaSnapshot, now_ms: int | None = None) -> None:
    """Write the checkpoint of ``snapshot`` and point ``_last_checkpoint`` at it
    (tombstones older than the retention at ``now_ms``, default now, left out)."""
    rows = _rows(snapshot, int(time.time() * 1000) if now_ms is None else now_ms)
    table = pa.Table.from_pylist(rows, schema=CHECKPOINT_SCHEMA)
    buf = _io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    log.io.write_atomic(log.checkpoint_path(snapshot.version), buf.getvalue())
    log.write_last_checkpoint(snapshot.version, len(rows), len(snapshot.files))


def read_checkpoint(log: DeltaLog, version: int, names: Sequence[str] = ()) -> list[Action]:
    """The actions of the checkpoint at ``version``: the files ``names`` (default: the
    classic single file), JSON or Parquet, and the sidecars a V2 checkpoint references."""
    names = tuple(names) or (checkpoint_name(version),)
    actions: list[Action] = []
    for name in names:
        actions.extend(_read_one(log, f"{log.log_dir}/{name}", version, name))
    sidecars = [a for a in actions if isinstance(a, Sidecar)]
    for sidecar in sidecars:
        location = log.sidecar_path(sidecar.path)
        actions.extend(_read_parquet(log, location, f"sidecar {sidecar.path} of {names[0]}"))
    if not any(isinstance(a, Protocol) for a in actions) or not any(
        isinstance(a, Metadata) for a in actions
    ):
        raise CorruptMetadataError(
            f"Delta table {log.location}, checkpoint {names[0]}: no protocol or metaData action"
        )
    return actions


def _read_one(log: DeltaLog, location: str, version: int, name: str) -> list[Action]:
    if name.endswith(".json"):
        where = f"Delta table {log.location}, checkpoint of version {version} ({name})"
        try:
            raw = log.io.read_bytes(location)
        except MissingFileError:
            raise MissingFileError(f"{where}: the checkpoint file is missing") from None
        out = []
        for n, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise CorruptMetadataError(f"{where}: line {n} is not JSON ({e})") from None
            action = parse_action(doc, where=f"{where}, line {n}")
            if action is not None:
                out.append(action)
        return out
    return _read_parquet(log, location, f"checkpoint of version {version} ({name})")


def _read_parquet(log: DeltaLog, location: str, what: str) -> list[Action]:
    where = f"Delta table {log.location}, {what}"
    try:
        raw = log.io.read_bytes(location)
    except MissingFileError:
        raise MissingFileError(f"{where}: the file is missing") from None
    try:
        table = pq.read_table(pa.BufferReader(raw))
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptMetadataError(
            f"{where}: not a readable Parquet file ({e}); delete it and its "
            "_last_checkpoint entry, the JSON commits still hold the history"
        ) from None
    actions: list[Action] = []
    for name in _COLUMNS:
        if name not in table.column_names:
            continue
        for body in table.column(name).to_pylist():
            if body is not None:
                action = parse_action({name: body}, where=where)
                if action is not None:
                    actions.append(action)
    return actions
