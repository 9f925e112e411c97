"""What a completed checkpoint records, and its JSON form.

Invariants: a checkpoint's id is the id of its last batch; its batch ids are strictly
increasing and lie in ``[first_batch_id, last_batch_id]`` (they may be empty when the
range held no batch with output). The JSON carries ``format-version``; a newer version
is refused rather than half understood.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stream_sink.exceptions import CorruptStateError, UnsupportedError, ValidationError
from stream_sink.secrets import recorded_settings

CHECKPOINT_FORMAT_VERSION = 1

DELTA_CATALOG = "delta"
"""The catalog name and ``type`` setting a Delta sink's :class:`TableIdentity` records:
a Delta table has no catalog; its ``table`` is the table's location and its uuid the
``metaData`` id."""


@dataclass(frozen=True)
class TableIdentity:
    """Which table a sink's state and checkpoints belong to. The table UUID decides
    (a renamed table keeps it; a dropped and re-created one gets a new one); the
    catalog and table names are there to be named in errors."""

    catalog: str
    table: str
    table_uuid: str
    catalog_settings: Mapping[str, str] | None = field(default=None, compare=False)
    """How to open the catalog again (``type``, ``warehouse``, ``uri`` without its
    password, storage settings), never credentials: only what
    :func:`stream_sink.secrets.recorded_settings` allows is kept, here and in the
    JSON; None when not recorded (older checkpoints, catalogs of other kinds).
    ``stream-sink status`` uses it."""

    def __post_init__(self) -> None:
        if self.catalog_settings is not None:
            object.__setattr__(self, "catalog_settings", recorded_settings(self.catalog_settings))

    @property
    def is_delta(self) -> bool:
        """A Delta table's identity (see :data:`DELTA_CATALOG`)."""
        return (self.catalog_settings or {}).get("type") == DELTA_CATALOG

    def same_table(self, other: TableIdentity) -> bool:
        return self.table_uuid == other.table_uuid

    def describe(self) -> str:
        if self.is_delta:
            return f"Delta table {self.table} (id {self.table_uuid})"
        return f"table {self.table} (catalog {self.catalog!r}, uuid {self.table_uuid})"

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "catalog": self.catalog,
            "table": self.table,
            "table-uuid": self.table_uuid,
        }
        if self.catalog_settings is not None:
            doc["catalog-settings"] = dict(sorted(self.catalog_settings.items()))
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, where: str) -> TableIdentity:
        settings = None
        if "catalog-settings" in doc:
            raw = _field(doc, "catalog-settings", dict, where)
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
                raise CorruptStateError(f"{where}: 'catalog-settings' must map strings to strings")
            settings = dict(raw)
        return cls(
            catalog=_field(doc, "catalog", str, where),
            table=_field(doc, "table", str, where),
            table_uuid=_field(doc, "table-uuid", str, where),
            catalog_settings=settings,
        )

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str) -> TableIdentity:
        return cls.from_dict(parse_json_object(text, where=where), where=where)


@dataclass(frozen=True)
class CheckpointMetadata:
    checkpoint_id: int
    job_id: str
    sink_id: str
    first_batch_id: int
    last_batch_id: int
    batch_ids: tuple[int, ...]
    created_ms: int
    format_version: int = CHECKPOINT_FORMAT_VERSION
    table: TableIdentity | None = None
    """The table the checkpoint belongs to (absent in checkpoints of older versions)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_ids", tuple(self.batch_ids))
        where = f"checkpoint {self.checkpoint_id} of sink {self.sink_id!r}"
        if self.last_batch_id != self.checkpoint_id:
            raise ValidationError(
                f"{where}: checkpoint id must equal its last batch id {self.last_batch_id}"
            )
        if self.first_batch_id > self.last_batch_id:
            raise ValidationError(
                f"{where}: first batch id {self.first_batch_id} is after the last "
                f"{self.last_batch_id}"
            )
        ids = self.batch_ids
        if any(a >= b for a, b in itertools.pairwise(ids)):
            raise ValidationError(f"{where}: batch ids {list(ids)} are not strictly increasing")
        if ids and (ids[0] < self.first_batch_id or ids[-1] > self.last_batch_id):
            raise ValidationError(
                f"{where}: batch ids {list(ids)} fall outside "
                f"[{self.first_batch_id}, {self.last_batch_id}]"
            )

    @classmethod
    def for_batches(
        cls, *, job_id: str, sink_id: str, batch_ids: Sequence[int], created_ms: int
    ) -> CheckpointMetadata:
        """The checkpoint of exactly ``batch_ids`` (non-empty): id = the last of them."""
        if not batch_ids:
            raise ValidationError(f"a checkpoint of sink {sink_id!r} needs at least one batch id")
        ids = tuple(batch_ids)
        return cls(ids[-1], job_id, sink_id, ids[0], ids[-1], ids, created_ms)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format-version": self.format_version,
            "checkpoint-id": self.checkpoint_id,
            "job-id": self.job_id,
            "sink-id": self.sink_id,
            "first-batch-id": self.first_batch_id,
            "last-batch-id": self.last_batch_id,
            "batch-ids": list(self.batch_ids),
            "created-ms": self.created_ms,
        }
        if self.table is not None:
            doc["table"] = self.table.to_dict()
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, where: str) -> CheckpointMetadata:
        """Parse; ``where`` (the file) is named in CorruptStateError for bad content."""
        version = _field(doc, "format-version", int, where)
        if version > CHECKPOINT_FORMAT_VERSION:
            raise UnsupportedError(
                f"{where}: checkpoint format {version} is newer than this stream_sink reads "
                f"({CHECKPOINT_FORMAT_VERSION})"
            )
        batch_ids = _field(doc, "batch-ids", list, where)
        table = None
        if "table" in doc:
            table = TableIdentity.from_dict(_field(doc, "table", dict, where), where=where)
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in batch_ids):
            raise CorruptStateError(f"{where}: 'batch-ids' must be a list of integers")
        try:
            return cls(
                checkpoint_id=_field(doc, "checkpoint-id", int, where),
                job_id=_field(doc, "job-id", str, where),
                sink_id=_field(doc, "sink-id", str, where),
                first_batch_id=_field(doc, "first-batch-id", int, where),
                last_batch_id=_field(doc, "last-batch-id", int, where),
                batch_ids=tuple(batch_ids),
                created_ms=_field(doc, "created-ms", int, where),
                format_version=version,
                table=table,
            )
        except ValidationError as e:
            raise CorruptStateError(f"{where}: {e}") from e

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str) -> CheckpointMetadata:
        return cls.from_dict(parse_json_object(text, where=where), where=where)


@dataclass(frozen=True)
class CompletedCheckpoint:
    """A checkpoint whose ``_metadata`` exists: its record and where its state lies."""

    metadata: CheckpointMetadata
    location: str
    state_location: str
    state_backend: str = field(default="rocksdb")

    @property
    def checkpoint_id(self) -> int:
        return self.metadata.checkpoint_id


def parse_json_object(text: str | bytes, *, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:  # numbers of 4,300 digits too, nesting
        raise CorruptStateError(f"{where}: not valid JSON ({e})") from e
    if not isinstance(doc, dict):
        raise CorruptStateError(f"{where}: expected a JSON object, found {type(doc).__name__}")
    return doc


def _field(doc: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    if name not in doc:
        raise CorruptStateError(f"{where}: missing field {name!r}")
    value = doc[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CorruptStateError(
            f"{where}: field {name!r} must be {kind.__name__}, found {type(value).__name__}"
        )
    return value
