"""Manifest lists: one Avro file per snapshot naming its manifests.

Invariants:
- A manifest written by the committing snapshot carries no sequence number until
  it is listed: the list writer assigns the snapshot's sequence number to it (and
  as its min sequence number when no entry had one), as Java's V2 list writer does.
  A manifest from another snapshot must already have both.
- v1 lists carry no sequence numbers or content: readers see 0 and DATA.
- The header carries snapshot-id, parent-snapshot-id ("null" when none),
  sequence-number (v2), first-row-id (v3) and format-version, as Java writes them.
- v3 (row lineage): a data manifest listed without a ``first_row_id`` gets the next
  id of the snapshot's range, which then grows by the manifest's added and existing
  rows (Java's V3 list writer); delete manifests never have one, listed ones keep
  theirs. ``next_row_id - first_row_id`` is the snapshot's ``added-rows``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from stream_sink.exceptions import CorruptMetadataError, ValidationError
from stream_sink.io.fileio import FileIO
from stream_sink.table import avro_schemas as avro

UNASSIGNED_SEQ = -1  # Java's marker for "assigned at commit"; None means the same here


class ManifestContent(IntEnum):
    DATA = 0
    DELETES = 1


@dataclass(frozen=True)
class FieldSummary:
    """Bounds of one partition field over a manifest (bounds serialized, None if all null)."""

    contains_null: bool
    contains_nan: bool | None = False
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


@dataclass(frozen=True)
class ManifestFile:
    """A manifest's row in a manifest list. sequence_number None: assigned at commit."""

    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: ManifestContent
    sequence_number: int | None
    min_sequence_number: int | None
    added_snapshot_id: int | None
    added_files_count: int | None
    existing_files_count: int | None
    deleted_files_count: int | None
    added_rows_count: int | None
    existing_rows_count: int | None
    deleted_rows_count: int | None
    partitions: tuple[FieldSummary, ...] | None = None
    key_metadata: bytes | None = None
    #: v3: the first ``_row_id`` of the rows of its data files that have none
    first_row_id: int | None = None

    # Unknown counts (v1 lists may omit them) mean "maybe", as in Java.
    @property
    def has_added_files(self) -> bool:
        return self.added_files_count is None or self.added_files_count > 0

    @property
    def has_existing_files(self) -> bool:
        return self.existing_files_count is None or self.existing_files_count > 0

    @property
    def has_deleted_files(self) -> bool:
        return self.deleted_files_count is None or self.deleted_files_count > 0


class ManifestListWriter:
    """Collects the manifests of one snapshot and writes the list on :meth:`close`."""

    def __init__(
        self,
        io: FileIO,
        location: str,
        snapshot_id: int,
        parent_snapshot_id: int | None,
        sequence_number: int,
        format_version: int = 2,
        first_row_id: int | None = None,
    ) -> None:
        if format_version not in (1, 2, 3):
            raise ValidationError(
                f"manifest list format version must be 1, 2 or 3, got {format_version}"
            )
        if format_version >= 3 and first_row_id is None:
            raise ValidationError(f"v3 manifest list {location} needs the snapshot's first row id")
        self._io, self.location = io, location
        self._snapshot_id, self._parent = snapshot_id, parent_snapshot_id
        self._sequence_number, self._version = sequence_number, format_version
        self._first_row_id = first_row_id
        self._next_row_id = first_row_id
        self._manifests: list[ManifestFile] = []
        self._length: int | None = None

    @property
    def manifests(self) -> list[ManifestFile]:
        """The manifests added so far, sequence numbers assigned."""
        return list(self._manifests)

    @property
    def next_row_id(self) -> int | None:
        """v3: one past the last row id this list assigned (the table's next-row-id)."""
        return self._next_row_id

    def add_manifests(self, manifests: Iterable[ManifestFile]) -> list[ManifestFile]:
        """Add manifests; returns them as they are listed (sequence numbers assigned)."""
        if self._length is not None:
            raise ValidationError(f"manifest list {self.location} is already closed")
        added = [self._assign(m) for m in manifests]
        self._manifests.extend(added)
        return added

    def _assign(self, m: ManifestFile) -> ManifestFile:
        if self._version == 1 and m.content != ManifestContent.DATA:
            raise ValidationError(f"v1 tables cannot hold delete manifest {m.manifest_path}")
        snapshot_id = self._snapshot_id if m.added_snapshot_id is None else m.added_snapshot_id
        seq = _assigned(m.sequence_number)
        min_seq = _assigned(m.min_sequence_number)
        if (seq is None or min_seq is None) and snapshot_id != self._snapshot_id:
            raise ValidationError(
                f"manifest {m.manifest_path} of snapshot {snapshot_id} has no sequence number; "
                f"only manifests written by snapshot {self._snapshot_id} may inherit one"
            )
        return replace(
            m,
            added_snapshot_id=snapshot_id,
            sequence_number=self._sequence_number if seq is None else seq,
            min_sequence_number=self._sequence_number if min_seq is None else min_seq,
            first_row_id=self._row_ids_for(m),
        )

    def _row_ids_for(self, m: ManifestFile) -> int | None:
        if self._version < 3 or m.content != ManifestContent.DATA:
            return None
        if m.first_row_id is not None:
            return m.first_row_id
        assert self._next_row_id is not None
        first = self._next_row_id
        self._next_row_id += (m.added_rows_count or 0) + (m.existing_rows_count or 0)
        return first

    def close(self) -> int:
        """Write the list (once); returns its length in bytes."""
        if self._length is None:
            struct = avro.manifest_file_type(self._version)
            records = [_encode(m, self._version) for m in self._manifests]
            self._length = avro.write_avro_file(
                self._io, self.location, struct, "manifest_file", records, self._header()
            )
        return self._length

    def _header(self) -> dict[str, str]:
        header = {
            "snapshot-id": str(self._snapshot_id),
            "parent-snapshot-id": "null" if self._parent is None else str(self._parent),
        }
        if self._version >= 2:
            header["sequence-number"] = str(self._sequence_number)
        if self._version >= 3:
            header["first-row-id"] = str(self._first_row_id)
        header["format-version"] = str(self._version)
        return header


def _assigned(seq: int | None) -> int | None:
    return None if seq is None or seq == UNASSIGNED_SEQ else seq


def _encode(m: ManifestFile, version: int) -> dict[str, Any]:
    record: dict[str, Any] = {
        "manifest_path": m.manifest_path,
        "manifest_length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id,
        "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files_count,
        "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count,
        "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partitions": None if m.partitions is None else [_summary(s) for s in m.partitions],
        "key_metadata": m.key_metadata,
    }
    if version >= 2:
        missing = [k for k, v in record.items() if v is None and k.endswith("_count")]
        if missing:
            raise ValidationError(f"manifest {m.manifest_path} lacks {', '.join(missing)}")
        record["content"] = int(m.content)
        record["sequence_number"] = m.sequence_number
        record["min_sequence_number"] = m.min_sequence_number
    if version >= 3:
        record["first_row_id"] = m.first_row_id
    return record


def _summary(s: FieldSummary) -> dict[str, Any]:
    return {
        "contains_null": s.contains_null,
        "contains_nan": s.contains_nan,
        "lower_bound": s.lower_bound,
        "upper_bound": s.upper_bound,
    }


def read_manifest_list(io: FileIO, location: str) -> list[ManifestFile]:
    """The manifests of a list file (v1, v2 or v3). Missing: MissingFileError; damaged:
    CorruptMetadataError naming ``location``."""
    contents = avro.read_avro_file(io, location)
    named = avro.named_types(contents.schema)
    view = avro.RecordView(contents.schema)
    summary_view = view.child(507, named)
    try:
        return [_decode(r, view, summary_view) for r in contents.records]
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptMetadataError(f"manifest list {location} has a malformed row: {e!r}") from e


def _decode(r: Mapping[str, Any], v: avro.RecordView, sv: avro.RecordView) -> ManifestFile:
    path = v.get(r, 500)
    if not isinstance(path, str):
        raise ValueError(f"manifest_path is {path!r}")
    partitions = v.get(r, 507)
    return ManifestFile(
        manifest_path=path,
        manifest_length=int(v.get(r, 501)),
        partition_spec_id=int(v.get(r, 502)),
        content=ManifestContent(v.get(r, 517, 0) or 0),
        sequence_number=v.get(r, 515, 0) if v.has(515) else 0,
        min_sequence_number=v.get(r, 516, 0) if v.has(516) else 0,
        added_snapshot_id=v.get(r, 503),
        added_files_count=v.get(r, 504),
        existing_files_count=v.get(r, 505),
        deleted_files_count=v.get(r, 506),
        added_rows_count=v.get(r, 512),
        existing_rows_count=v.get(r, 513),
        deleted_rows_count=v.get(r, 514),
        partitions=None if partitions is None else tuple(_field_summary(p, sv) for p in partitions),
        key_metadata=v.get(r, 519),
        first_row_id=v.get(r, 520),
    )


def _field_summary(p: Mapping[str, Any], sv: avro.RecordView) -> FieldSummary:
    return FieldSummary(
        contains_null=bool(sv.get(p, 509)),
        contains_nan=sv.get(p, 518),
        lower_bound=sv.get(p, 510),
        upper_bound=sv.get(p, 511),
    )
