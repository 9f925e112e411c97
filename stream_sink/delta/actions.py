"""Delta Lake log actions (PROTOCOL.md "Actions") as frozen dataclasses.

Each action maps to one JSON line of a commit file ``{"<name>": {...}}`` and to one row
of a checkpoint. Invariants:
- Partition values are strings (or None for null), as the protocol stores them.
- ``path`` of add/remove/cdc is the URI-encoded path relative to the table root, exactly
  as it appears in the log (decode with :func:`stream_sink.delta.paths.decode_path`).
- Unknown action names are kept out of replay (returned as None by :func:`parse_action`);
  unknown fields of known actions are ignored.
- A ``domainMetadata`` action's ``configuration`` is an opaque string (JSON by
  convention); which domains a writer may write is :mod:`.domains`' rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stream_sink.exceptions import DECODE_ERRORS, CorruptMetadataError


@dataclass(frozen=True)
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            out["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            out["writerFeatures"] = list(self.writer_features)
        return out


@dataclass(frozen=True)
class Metadata:
    """``schema_string`` is "" only for a placeholder (Delta Live Tables writes one and
    supersedes it later in the log); a snapshot whose newest metaData is one is refused."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str] = field(default_factory=dict)
    created_time: int | None = None
    name: str | None = None
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": self.schema_string,
            "partitionColumns": list(self.partition_columns),
            "configuration": dict(self.configuration),
            "createdTime": self.created_time,
        }


@dataclass(frozen=True)
class AddFile:
    path: str
    partition_values: Mapping[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: Mapping[str, str] | None = None
    deletion_vector: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
        }
        if self.stats is not None:
            out["stats"] = self.stats
        if self.tags:
            out["tags"] = dict(self.tags)
        if self.deletion_vector is not None:
            out["deletionVector"] = dict(self.deletion_vector)
        return out

    @property
    def dv_id(self) -> str | None:
        """The deletion vector's ``uniqueId`` (None without one): with ``path`` the key of
        this logical file."""
        return dv_unique_id(self.deletion_vector)

    def remove(self, timestamp_ms: int, data_change: bool = True) -> RemoveFile:
        """The remove action that logically deletes this file (with its deletion vector)."""
        return RemoveFile(
            self.path,
            timestamp_ms,
            data_change,
            True,
            self.partition_values,
            self.size,
            self.deletion_vector,
        )


@dataclass(frozen=True)
class RemoveFile:
    path: str
    deletion_timestamp: int | None
    data_change: bool = True
    extended_file_metadata: bool = False
    partition_values: Mapping[str, str | None] | None = None
    size: int | None = None
    deletion_vector: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "deletionTimestamp": self.deletion_timestamp,
            "dataChange": self.data_change,
        }
        if self.extended_file_metadata:
            out["extendedFileMetadata"] = True
            out["partitionValues"] = dict(self.partition_values or {})
            out["size"] = self.size
        if self.deletion_vector is not None:
            out["deletionVector"] = dict(self.deletion_vector)
        return out

    @property
    def dv_id(self) -> str | None:
        return dv_unique_id(self.deletion_vector)


def dv_unique_id(dv: Mapping[str, Any] | None) -> str | None:
    """PROTOCOL.md "Derived Fields": ``<storageType><pathOrInlineDv>[@<offset>]``."""
    if dv is None:
        return None
    base = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}"
    offset = dv.get("offset")
    return base if offset is None else f"{base}@{offset}"


def file_key(path: str, dv_id: str | None) -> str:
    """The key of a logical file (path, deletion vector id) as one string."""
    return path if dv_id is None else f"{path}\0{dv_id}"


@dataclass(frozen=True)
class AddCDCFile:
    path: str
    partition_values: Mapping[str, str | None]
    size: int
    data_change: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "dataChange": self.data_change,
        }


@dataclass(frozen=True)
class Txn:
    """``SetTransaction``: the highest ``version`` an application ``app_id`` committed."""

    app_id: str
    version: int
    last_updated: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            out["lastUpdated"] = self.last_updated
        return out


@dataclass(frozen=True)
class CommitInfo:
    values: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.values)


@dataclass(frozen=True)
class DomainMetadata:
    """PROTOCOL.md "Domain Metadata": named configuration (``domain`` -> ``configuration``)
    carried by log replay and checkpoints; ``removed`` drops the domain."""

    domain: str
    configuration: str
    removed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "configuration": self.configuration,
            "removed": self.removed,
        }


@dataclass(frozen=True)
class Sidecar:
    """A v2 checkpoint's reference to a ``_delta_log/_sidecars`` file of add/remove rows."""

    path: str
    size_in_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sizeInBytes": self.size_in_bytes}


@dataclass(frozen=True)
class CheckpointMetadata:
    """The one row that marks a checkpoint as V2 spec; no part of log replay."""

    version: int

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version}


Action = (
    Protocol
    | Metadata
    | AddFile
    | RemoveFile
    | AddCDCFile
    | Txn
    | CommitInfo
    | DomainMetadata
    | Sidecar
    | CheckpointMetadata
)

_NAMES: dict[type, str] = {
    Protocol: "protocol",
    Metadata: "metaData",
    AddFile: "add",
    RemoveFile: "remove",
    AddCDCFile: "cdc",
    Txn: "txn",
    CommitInfo: "commitInfo",
    DomainMetadata: "domainMetadata",
    Sidecar: "sidecar",
    CheckpointMetadata: "checkpointMetadata",
}


def action_to_json(action: Action) -> dict[str, Any]:
    """``{"<name>": {...}}`` for one action."""
    return {_NAMES[type(action)]: action.to_json()}


def parse_action(doc: Mapping[str, Any], *, where: str) -> Action | None:
    """The action of one log line (or checkpoint row); None for names this code does not
    replay (an action name a newer protocol adds). ``where`` is named in errors."""
    try:
        for name, body in doc.items():
            if body is None:
                continue
            parser = _PARSERS.get(name)
            return parser(body) if parser is not None else None
    except DECODE_ERRORS as e:
        raise CorruptMetadataError(f"{where}: malformed action {doc!r:.200} ({e!r})") from e
    return None


def _kv(value: Any) -> dict[str, Any]:
    """A map as JSON gives it (dict) or as a Parquet checkpoint gives it (pairs)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {k: v for k, v in value}


def _partition_values(value: Any) -> dict[str, str | None]:
    """``partitionValues``: strings (or null) by column name, as the protocol stores them."""
    values = _kv(value)
    bad = {
        k: v
        for k, v in values.items()
        if not isinstance(k, str) or not isinstance(v, (str, type(None)))
    }
    if bad:
        raise TypeError(f"partition values must be strings or null, found {bad!r:.100}")
    return values


def _features(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(f) for f in value)


def _parse_protocol(b: Mapping[str, Any]) -> Protocol:
    return Protocol(
        int(b["minReaderVersion"]),
        int(b["minWriterVersion"]),
        _features(b.get("readerFeatures")),
        _features(b.get("writerFeatures")),
    )


def _parse_metadata(b: Mapping[str, Any]) -> Metadata:
    return Metadata(
        id=str(b["id"]),
        schema_string=str(b.get("schemaString") or ""),
        partition_columns=tuple(str(c) for c in b.get("partitionColumns") or ()),
        configuration={str(k): str(v) for k, v in _kv(b.get("configuration")).items()},
        created_time=b.get("createdTime"),
        name=b.get("name"),
        description=b.get("description"),
    )


def _parse_add(b: Mapping[str, Any]) -> AddFile:
    return AddFile(
        path=str(b["path"]),
        partition_values=_partition_values(b.get("partitionValues")),
        size=int(b["size"]),
        modification_time=int(b.get("modificationTime") or 0),
        data_change=bool(b.get("dataChange", True)),
        stats=b.get("stats"),
        tags=_kv(b.get("tags")) or None,
        deletion_vector=_dv(b.get("deletionVector")),
    )


def _dv(value: Any) -> dict[str, Any] | None:
    """A deletion vector descriptor without the nulls a Parquet checkpoint row carries."""
    if value is None:
        return None
    out = {str(k): v for k, v in dict(value).items() if v is not None}
    return out or None


def _parse_remove(b: Mapping[str, Any]) -> RemoveFile:
    pv = b.get("partitionValues")
    return RemoveFile(
        path=str(b["path"]),
        deletion_timestamp=b.get("deletionTimestamp"),
        data_change=bool(b.get("dataChange", True)),
        extended_file_metadata=bool(b.get("extendedFileMetadata") or False),
        partition_values=None if pv is None else _partition_values(pv),
        size=b.get("size"),
        deletion_vector=_dv(b.get("deletionVector")),
    )


def _parse_cdc(b: Mapping[str, Any]) -> AddCDCFile:
    return AddCDCFile(
        str(b["path"]),
        _partition_values(b.get("partitionValues")),
        int(b["size"]),
        bool(b.get("dataChange", False)),
    )


def _parse_txn(b: Mapping[str, Any]) -> Txn:
    return Txn(str(b["appId"]), int(b["version"]), b.get("lastUpdated"))


def _parse_domain(b: Mapping[str, Any]) -> DomainMetadata:
    config = b["configuration"]
    if not isinstance(config, str):
        raise TypeError(f"domainMetadata configuration must be a string, found {config!r:.100}")
    return DomainMetadata(str(b["domain"]), config, bool(b.get("removed") or False))


_PARSERS: dict[str, Any] = {
    "protocol": _parse_protocol,
    "metaData": _parse_metadata,
    "add": _parse_add,
    "remove": _parse_remove,
    "cdc": _parse_cdc,
    "txn": _parse_txn,
    "commitInfo": lambda b: CommitInfo(dict(b)),
    "domainMetadata": _parse_domain,
    "sidecar": lambda b: Sidecar(str(b["path"]), b.get("sizeInBytes")),
    "checkpointMetadata": lambda b: CheckpointMetadata(int(b["version"])),
}
