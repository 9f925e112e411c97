"""Snapshots, snapshot references (branches and tags) and snapshot summaries.

Invariants:
- A snapshot is immutable once committed; its ``sequence_number`` is the table's
  ``last-sequence-number`` at the commit that added it (v2), 0 in v1.
- ``summary["operation"]`` is one of append, replace, overwrite, delete.
- A branch ref points at the head of a line of snapshots; ``main`` is the
  table's current snapshot.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping

from stream_sink.exceptions import CorruptMetadataError

MAIN_BRANCH = "main"


class Operation:
    APPEND = "append"
    REPLACE = "replace"
    OVERWRITE = "overwrite"
    DELETE = "delete"
    ALL = (APPEND, REPLACE, OVERWRITE, DELETE)


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_snapshot_id: int | None
    sequence_number: int
    timestamp_ms: int
    manifest_list: str
    summary: Mapping[str, str] = field(default_factory=dict)
    schema_id: int | None = None
    #: v1 only: the manifests listed in the metadata itself (old writers), in place
    #: of a manifest list (``manifest_list`` is then "")
    manifests: tuple[str, ...] = ()
    #: v3 row lineage: the first row id of the snapshot's range and the range's size
    #: (None for snapshots committed before the table was v3)
    first_row_id: int | None = None
    added_rows: int | None = None

    @property
    def operation(self) -> str:
        return self.summary.get("operation", Operation.APPEND)

    def to_json(self, format_version: int) -> dict[str, Any]:
        out: dict[str, Any] = {"snapshot-id": self.snapshot_id}
        if self.parent_snapshot_id is not None:
            out["parent-snapshot-id"] = self.parent_snapshot_id
        if format_version >= 2:
            out["sequence-number"] = self.sequence_number
        out["timestamp-ms"] = self.timestamp_ms
        if self.manifest_list or not self.manifests:
            out["manifest-list"] = self.manifest_list
        else:
            out["manifests"] = list(self.manifests)
        out["summary"] = dict(self.summary)
        if self.schema_id is not None:
            out["schema-id"] = self.schema_id
        if format_version >= 3 and self.first_row_id is not None:
            out["first-row-id"] = self.first_row_id
            out["added-rows"] = self.added_rows or 0
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> Snapshot:
        try:
            summary = dict(obj.get("summary") or {"operation": Operation.APPEND})
            embedded = () if obj.get("manifest-list") else obj.get("manifests")
            if "manifest-list" not in obj and not isinstance(embedded, list):
                raise CorruptMetadataError(
                    f"snapshot {obj.get('snapshot-id')} has neither a manifest-list "
                    "nor (format version 1) a manifests list"
                )
            return Snapshot(
                snapshot_id=int(obj["snapshot-id"]),
                parent_snapshot_id=(
                    int(obj["parent-snapshot-id"])
                    if obj.get("parent-snapshot-id") is not None
                    else None
                ),
                sequence_number=int(obj.get("sequence-number", 0)),
                timestamp_ms=int(obj["timestamp-ms"]),
                manifest_list=str(obj.get("manifest-list") or ""),
                summary={str(k): str(v) for k, v in summary.items()},
                schema_id=int(obj["schema-id"]) if obj.get("schema-id") is not None else None,
                manifests=tuple(str(m) for m in embedded or ()),
                first_row_id=_optional_int(obj.get("first-row-id")),
                added_rows=_optional_int(obj.get("added-rows")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadataError(f"malformed snapshot {str(obj)[:200]}: {e}") from e


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class SnapshotRef:
    snapshot_id: int
    ref_type: str = "branch"  # "branch" | "tag"
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None

    @property
    def is_branch(self) -> bool:
        return self.ref_type == "branch"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"snapshot-id": self.snapshot_id, "type": self.ref_type}
        if self.min_snapshots_to_keep is not None:
            out["min-snapshots-to-keep"] = self.min_snapshots_to_keep
        if self.max_snapshot_age_ms is not None:
            out["max-snapshot-age-ms"] = self.max_snapshot_age_ms
        if self.max_ref_age_ms is not None:
            out["max-ref-age-ms"] = self.max_ref_age_ms
        return out

    @staticmethod
    def from_json(obj: Mapping[str, Any]) -> SnapshotRef:
        try:
            return SnapshotRef(
                snapshot_id=int(obj["snapshot-id"]),
                ref_type=str(obj.get("type", "branch")).lower(),
                min_snapshots_to_keep=obj.get("min-snapshots-to-keep"),
                max_snapshot_age_ms=obj.get("max-snapshot-age-ms"),
                max_ref_age_ms=obj.get("max-ref-age-ms"),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptMetadataError(f"malformed ref {obj!r}: {e}") from e


def new_snapshot_id() -> int:
    """A random positive 63-bit id, as Java derives it from a random UUID."""
    u = uuid.uuid4().int
    return ((u >> 64) ^ (u & 0xFFFFFFFFFFFFFFFF)) & 0x7FFFFFFFFFFFFFFF
