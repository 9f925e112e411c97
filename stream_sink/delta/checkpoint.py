"""Single-file Parquet checkpoints (PROTOCOL.md "Checkpoints") and ``_last_checkpoint``.

A checkpoint at version v holds the reconciled state after v: protocol, metadata, the
latest ``txn`` per appId, every live ``add`` and the ``remove`` tombstones, one action
per row in the column named after it. Invariants: the checkpoint file is written
atomically before ``_last_checkpoint`` points at it; a checkpoint that cannot be
decoded raises CorruptMetadataError naming its version.

Unlike commit files, both are plain overwrites (a rename over locally, a PUT on S3),
and that is safe: the checkpoint of version v is a function of the committed log up to
v, so two writers checkpointing v write the same state and either copy is right; each
write is atomic (a reader sees the old object or the whole new one); and
``_last_checkpoint`` is only a hint: readers list ``_delta_log`` and use the newest
checkpoint at or below the version they want, then the JSON commits after it, so a
hint left pointing at an older checkpoint by a slower writer costs time, not
correctness. A crash between the two writes leaves a checkpoint nothing points at yet,
which listing finds.
"""

from __future__ import annotations

import io as _io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.exceptions import CorruptMetadataError, MissingFileError

from .actions import Action, parse_action
from .log import DeltaLog, checkpoint_name
from .snapshot import DeltaSnapshot

_STR_MAP = pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string()))
_STR_MAP_NN = pa.map_(pa.field("key", pa.string(), False), pa.field("value", pa.string(), False))
_FEATURES = pa.list_(pa.field("element", pa.string(), False))

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
    ]
)


def _rows(snapshot: DeltaSnapshot) -> list[dict[str, Any]]:
    def row(name: str, body: dict[str, Any]) -> dict[str, Any]:
        return {name: body}

    out = [row("protocol", snapshot.protocol.to_json())]
    meta = snapshot.metadata.to_json()
    meta["configuration"] = list(meta["configuration"].items())
    meta["format"] = {"provider": "parquet", "options": []}
    out.append(row("metaData", meta))
    for txn in snapshot.txns.values():
        out.append(row("txn", txn.to_json()))
    for add in snapshot.files.values():
        body = add.to_json()
        body["partitionValues"] = list(add.partition_values.items())
        body["tags"] = list(add.tags.items()) if add.tags else None
        out.append(row("add", body))
    for rm in snapshot.tombstones.values():
        body = rm.to_json()
        body["partitionValues"] = list((rm.partition_values or {}).items()) or None
        out.append(row("remove", body))
    return out


def write_checkpoint(log: DeltaLog, snapshot: DeltaSnapshot) -> None:
    """Write the checkpoint of ``snapshot`` and point ``_last_checkpoint`` at it."""
    rows = _rows(snapshot)
    table = pa.Table.from_pylist(rows, schema=CHECKPOINT_SCHEMA)
    buf = _io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    log.io.write_atomic(log.checkpoint_path(snapshot.version), buf.getvalue())
    log.write_last_checkpoint(snapshot.version, len(rows), len(snapshot.files))


def read_checkpoint(log: DeltaLog, version: int) -> list[Action]:
    """The actions of the single-file checkpoint at ``version``."""
    where = (
        f"Delta table {log.location}, checkpoint of version {version} ({checkpoint_name(version)})"
    )
    try:
        raw = log.io.read_bytes(log.checkpoint_path(version))
    except MissingFileError:
        raise MissingFileError(f"{where}: the checkpoint file is missing") from None
    try:
        table = pq.read_table(pa.BufferReader(raw))
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptMetadataError(
            f"{where}: not a readable Parquet file ({e}); delete it and its "
            "_last_checkpoint entry, the JSON commits still hold the history"
        ) from None
    names = [n for n in ("protocol", "metaData", "txn", "add", "remove") if n in table.column_names]
    if "protocol" not in names or "metaData" not in names:
        raise CorruptMetadataError(f"{where}: no protocol or metaData column")
    actions: list[Action] = []
    for name in names:
        for body in table.column(name).to_pylist():
            if body is not None:
                action = parse_action({name: body}, where=where)
                if action is not None:
                    actions.append(action)
    return actions
