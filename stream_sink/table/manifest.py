"""Manifests: the Avro files listing a snapshot's data and delete files.

Invariants:
- A manifest holds one partition spec and one content kind (data or deletes).
- An ADDED entry written without sequence numbers inherits the sequence number of
  the snapshot that commits its manifest; readers fill them in (spec: "Sequence
  Number Inheritance"), as they fill a null snapshot id from the manifest.
- v1 manifests carry no sequence numbers (read as 0) and hold data files only.
- v3 (row lineage): an ADDED data file is written with a null ``first_row_id``; a
  reader assigns it from the manifest's ``first_row_id`` plus the record counts of
  the live data files before it that had none (spec: "First Row ID Inheritance");
  EXISTING and DELETED entries are written with the value they were read with.
- A deletion vector (v3) is a position-delete entry in a Puffin file with
  ``referenced_data_file``, ``content_offset`` and ``content_size_in_bytes`` set.
- In memory, partition values are tuples of internal values in partition-spec order
  and bounds are already serialized single values (see conversions).
- Files are written whole, in Java's Avro layout (see avro_schemas), so Java,
  DuckDB and pyiceberg read them; reading goes by field id.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum, IntEnum
from typing import Any

from stream_sink.exceptions import CorruptMetadataError, ValidationError
from stream_sink.io.fileio import FileIO
from stream_sink.table import avro_schemas as avro
from stream_sink.table.conversions import (
    decimal_required_bytes,
    decimal_to_unscaled,
    to_bytes,
    unscaled_to_bytes,
    unscaled_to_decimal,
)
from stream_sink.table.manifest_list import (
    FieldSummary,
    ManifestContent,
    ManifestFile,
    ManifestListWriter,
    read_manifest_list,
)
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.schema import Schema
from stream_sink.table.snapshots import Snapshot
from stream_sink.table.types import DecimalType, IcebergType, StructType, UUIDType

__all__ = [
    "DataFile",
    "DataFileContent",
    "FieldSummary",
    "FileFormat",
    "ManifestContent",
    "ManifestEntry",
    "ManifestEntryStatus",
    "ManifestFile",
    "ManifestListWriter",
    "ManifestWriter",
    "PartitionSummary",
    "read_manifest",
    "read_manifest_list",
]

V1_BLOCK_SIZE = 64 * 1024 * 1024  # the value Java writes into v1's block_size_in_bytes


class DataFileContent(IntEnum):
    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


class ManifestEntryStatus(IntEnum):
    EXISTING = 0
    ADDED = 1
    DELETED = 2


class FileFormat(str, Enum):
    PARQUET = "PARQUET"
    AVRO = "AVRO"
    ORC = "ORC"
    PUFFIN = "PUFFIN"


SUPPORTED_MANIFEST_VERSIONS = (1, 2, 3)


@dataclass(frozen=True)
class DataFile:
    """A data or delete file with its partition and column metrics (ids are field ids)."""

    content: DataFileContent
    file_path: str
    file_format: FileFormat
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    column_sizes: dict[int, int] | None = None
    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None
    key_metadata: bytes | None = None
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None
    sort_order_id: int | None = None
    referenced_data_file: str | None = None
    #: v3 row lineage: the ``_row_id`` of the file's first row (None: inherited/unknown)
    first_row_id: int | None = None
    #: v3 deletion vectors: where the blob starts in the Puffin file, and its length
    content_offset: int | None = None
    content_size_in_bytes: int | None = None

    @property
    def is_delete(self) -> bool:
        return self.content != DataFileContent.DATA

    @property
    def is_deletion_vector(self) -> bool:
        """A v3 deletion vector: a position delete stored as a Puffin blob."""
        return (
            self.content == DataFileContent.POSITION_DELETES
            and self.file_format == FileFormat.PUFFIN
        )


@dataclass(frozen=True)
class ManifestEntry:
    """A file's row in a manifest. Sequence numbers None: not yet assigned (inherited)."""

    status: ManifestEntryStatus
    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    data_file: DataFile

    @property
    def is_live(self) -> bool:
        return self.status != ManifestEntryStatus.DELETED


# --- writing -----------------------------------------------------------------------


class ManifestWriter:
    """Collects entries of one manifest and writes the Avro file on :meth:`close`.

    The header's ``partition-spec`` (the spec's field list, as Java writes it) comes
    from ``partition_spec`` or ``partition_spec_json``; with neither, it is ``[]`` for
    an unpartitioned manifest and left out otherwise (readers use the table's specs).
    ``snapshot_id`` None writes entries whose snapshot id is inherited at commit.
    """

    def __init__(
        self,
        io: FileIO,
        location: str,
        spec_id: int,
        partition_type: StructType,
        schema: Schema,
        snapshot_id: int | None,
        content: ManifestContent = ManifestContent.DATA,
        format_version: int = 2,
        *,
        partition_spec: PartitionSpec | None = None,
        partition_spec_json: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        if format_version not in SUPPORTED_MANIFEST_VERSIONS:
            raise ValidationError(
                f"manifest format version must be 1, 2 or 3, got {format_version}"
            )
        if format_version == 1 and content != ManifestContent.DATA:
            raise ValidationError(f"v1 tables cannot hold delete manifests ({location})")
        if partition_spec is not None:
            partition_spec_json = partition_spec.fields_to_json()
        if partition_spec_json is None and not partition_type.fields:
            partition_spec_json = []
        self._io, self.location = io, location
        self._spec_id, self._partition_type = spec_id, partition_type
        self._schema, self._snapshot_id = schema, snapshot_id
        self._content, self._version = content, format_version
        self._spec_json = None if partition_spec_json is None else list(partition_spec_json)
        self._entries: list[ManifestEntry] = []
        self._summary = PartitionSummary(partition_type)
        self._closed: ManifestFile | None = None

    @staticmethod
    def for_spec(
        io: FileIO,
        location: str,
        spec: PartitionSpec,
        schema: Schema,
        snapshot_id: int | None,
        content: ManifestContent = ManifestContent.DATA,
        format_version: int = 2,
    ) -> ManifestWriter:
        """A writer for the manifest of one partition spec of a table with ``schema``."""
        return ManifestWriter(
            io,
            location,
            spec.spec_id,
            spec.partition_type(schema),
            schema,
            snapshot_id,
            content,
            format_version,
            partition_spec=spec,
        )

    def add(self, data_file: DataFile, sequence_number: int | None = None) -> None:
        """An ADDED entry; ``sequence_number`` None inherits the committing snapshot's.
        A data file's ``first_row_id`` is dropped: new rows get ids by inheritance."""
        status = ManifestEntryStatus.ADDED
        if data_file.first_row_id is not None:
            data_file = replace(data_file, first_row_id=None)
        self._append(ManifestEntry(status, self._snapshot_id, sequence_number, None, data_file))

    def existing(self, entry: ManifestEntry) -> None:
        """Carry a live entry over unchanged (its snapshot id and sequence numbers kept)."""
        self._append(replace(entry, status=ManifestEntryStatus.EXISTING))

    def delete(self, entry: ManifestEntry) -> None:
        """Mark an entry deleted by this writer's snapshot, keeping its sequence numbers."""
        status = ManifestEntryStatus.DELETED
        self._append(replace(entry, status=status, snapshot_id=self._snapshot_id))

    def _append(self, entry: ManifestEntry) -> None:
        if self._closed is not None:
            raise ValidationError(f"manifest {self.location} is already closed")
        f = entry.data_file
        if (f.is_delete) != (self._content == ManifestContent.DELETES):
            kind = "delete" if f.is_delete else "data"
            raise ValidationError(
                f"cannot put {kind} file {f.file_path} into {self._content.name.lower()} "
                f"manifest {self.location}"
            )
        if len(f.partition) != len(self._partition_type.fields):
            raise ValidationError(
                f"file {f.file_path} has partition {f.partition!r}, manifest {self.location} "
                f"expects {len(self._partition_type.fields)} values"
            )
        added = entry.status == ManifestEntryStatus.ADDED
        if self._version >= 2 and not added and entry.sequence_number is None:
            raise ValidationError(
                f"{entry.status.name} entry for {f.file_path} needs a sequence number"
            )
        self._summary.update(f.partition)
        self._entries.append(entry)

    def close(self) -> ManifestFile:
        """Write the file (once) and describe it; later calls return the same description."""
        if self._closed is not None:
            return self._closed
        entry_type = avro.manifest_entry_type(self._partition_type, self._version)
        codec = _EntryCodec(self._partition_type, self._version)
        records = [codec.encode(e) for e in self._entries]
        length = avro.write_avro_file(
            self._io, self.location, entry_type, "manifest_entry", records, self._header()
        )
        self._closed = self._describe(length)
        return self._closed

    def _header(self) -> dict[str, str]:
        header = {
            "schema": avro.compact_json(self._schema.to_json()),
            "schema-id": str(self._schema.schema_id),
            "partition-spec": avro.compact_json(self._spec_json),
            "partition-spec-id": str(self._spec_id),
            "format-version": str(self._version),
            "content": "data" if self._content == ManifestContent.DATA else "deletes",
        }
        if self._spec_json is None:
            del header["partition-spec"]
        return header

    def _describe(self, length: int) -> ManifestFile:
        counts = {s: [0, 0] for s in ManifestEntryStatus}
        for e in self._entries:
            counts[e.status][0] += 1
            counts[e.status][1] += e.data_file.record_count
        live_seqs = [e.sequence_number for e in self._entries if e.is_live]
        known = [s for s in live_seqs if s is not None]
        added, existing, deleted = (
            counts[ManifestEntryStatus.ADDED],
            counts[ManifestEntryStatus.EXISTING],
            counts[ManifestEntryStatus.DELETED],
        )
        return ManifestFile(
            manifest_path=self.location,
            manifest_length=length,
            partition_spec_id=self._spec_id,
            content=self._content,
            sequence_number=None,
            min_sequence_number=min(known) if known else None,
            added_snapshot_id=self._snapshot_id,
            added_files_count=added[0],
            existing_files_count=existing[0],
            deleted_files_count=deleted[0],
            added_rows_count=added[1],
            existing_rows_count=existing[1],
            deleted_rows_count=deleted[1],
            partitions=self._summary.summaries(),
        )


class PartitionSummary:
    """Per partition field: null/NaN flags and the min/max value, as Java's PartitionSummary."""

    def __init__(self, partition_type: StructType) -> None:
        self._types = [f.field_type for f in partition_type.fields]
        self._null = [False] * len(self._types)
        self._nan = [False] * len(self._types)
        self._min: list[Any] = [None] * len(self._types)
        self._max: list[Any] = [None] * len(self._types)

    def update(self, partition: Sequence[Any]) -> None:
        for i, value in enumerate(partition):
            if value is None:
                self._null[i] = True
            elif isinstance(value, float) and math.isnan(value):
                self._nan[i] = True
            else:
                if self._min[i] is None or value < self._min[i]:
                    self._min[i] = value
                if self._max[i] is None or value > self._max[i]:
                    self._max[i] = value

    def summaries(self) -> tuple[FieldSummary, ...]:
        return tuple(
            FieldSummary(
                contains_null=self._null[i],
                contains_nan=self._nan[i],
                lower_bound=None if self._min[i] is None else to_bytes(t, self._min[i]),
                upper_bound=None if self._max[i] is None else to_bytes(t, self._max[i]),
            )
            for i, t in enumerate(self._types)
        )


# --- reading -----------------------------------------------------------------------


def read_manifest(
    io: FileIO, manifest: ManifestFile, partition_type: StructType | None = None
) -> list[ManifestEntry]:
    """The entries of ``manifest`` with snapshot ids and sequence numbers inherited.

    ``partition_type`` orders partition values by partition field id (absent fields
    read as None); without it, values come in the file's order. A missing file raises
    MissingFileError, a damaged one CorruptMetadataError naming it, and so does one
    holding more entries than the manifest list counts for it (read no further).
    """
    contents = avro.read_avro_file(io, manifest.manifest_path, _listed_entries(manifest))
    try:
        codec = _entry_reader(contents.schema_text, contents.schema, partition_type)
        entries = [codec.decode(r, manifest) for r in contents.records]
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration) as e:
        raise CorruptMetadataError(
            f"manifest {manifest.manifest_path} has a malformed entry: {e!r}"
        ) from e
    entries = [_inherit(e, manifest) for e in entries]
    if manifest.content == ManifestContent.DATA:
        entries = _inherit_row_ids(entries, manifest.first_row_id)
    return entries


def _listed_entries(manifest: ManifestFile) -> int | None:
    """How many entries the manifest list says ``manifest`` holds (None: unknown)."""
    listed = (
        manifest.added_files_count,
        manifest.existing_files_count,
        manifest.deleted_files_count,
    )
    counts = [c for c in listed if isinstance(c, int) and c >= 0]
    return sum(counts) if len(counts) == len(listed) else None


def _inherit_row_ids(entries: list[ManifestEntry], first_row_id: int | None) -> list[ManifestEntry]:
    """Row lineage (v3): a live data file with a null ``first_row_id`` in a manifest
    that has one gets the manifest's plus the record counts of such files before it
    (Java's ManifestReader skips DELETED entries the same way). A manifest without
    one (listed before the table was v3) leaves every file's value unknown."""
    if first_row_id is None:
        return [e if e.data_file.first_row_id is None else _with_row_id(e, None) for e in entries]
    out, next_id = [], first_row_id
    for e in entries:
        if e.is_live and e.data_file.first_row_id is None:
            e = _with_row_id(e, next_id)
            next_id += e.data_file.record_count
        out.append(e)
    return out


def _with_row_id(entry: ManifestEntry, first_row_id: int | None) -> ManifestEntry:
    return replace(entry, data_file=replace(entry.data_file, first_row_id=first_row_id))


_ENTRY_READERS: dict[tuple[str, StructType | None], _EntryReader] = {}
_ENTRY_READERS_LOCK = threading.Lock()


def _inherit(entry: ManifestEntry, manifest: ManifestFile) -> ManifestEntry:
    snapshot_id = entry.snapshot_id
    if snapshot_id is None:
        snapshot_id = manifest.added_snapshot_id
    seq, file_seq = entry.sequence_number, entry.file_sequence_number
    manifest_seq = manifest.sequence_number
    inherits = manifest_seq == 0 or entry.status == ManifestEntryStatus.ADDED
    if manifest_seq is not None and inherits:
        seq = manifest_seq if seq is None else seq
        file_seq = manifest_seq if file_seq is None else file_seq
    return replace(
        entry, snapshot_id=snapshot_id, sequence_number=seq, file_sequence_number=file_seq
    )


# --- Avro records <-> entries ---------------------------------------------------------


class _EntryCodec:
    """Turns entries into Avro records of the v1/v2 manifest_entry schema."""

    def __init__(self, partition_type: StructType, version: int) -> None:
        self._names = [avro.avro_name(f.name) for f in partition_type.fields]
        self._types = [f.field_type for f in partition_type.fields]
        self._version = version

    def encode(self, e: ManifestEntry) -> dict[str, Any]:
        record: dict[str, Any] = {
            "status": int(e.status),
            "snapshot_id": e.snapshot_id,
            "data_file": self._file(e.data_file),
        }
        if self._version >= 2:
            record["sequence_number"] = e.sequence_number
            record["file_sequence_number"] = e.file_sequence_number
        return record

    def _file(self, f: DataFile) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file_path": f.file_path,
            "file_format": FileFormat(f.file_format).value,
            "partition": {
                name: _avro_value(t, v)
                for name, t, v in zip(self._names, self._types, f.partition, strict=True)
            },
            "record_count": f.record_count,
            "file_size_in_bytes": f.file_size_in_bytes,
            "column_sizes": _pairs(f.column_sizes),
            "value_counts": _pairs(f.value_counts),
            "null_value_counts": _pairs(f.null_value_counts),
            "nan_value_counts": _pairs(f.nan_value_counts),
            "lower_bounds": _pairs(f.lower_bounds),
            "upper_bounds": _pairs(f.upper_bounds),
            "key_metadata": f.key_metadata,
            "split_offsets": None if f.split_offsets is None else list(f.split_offsets),
            "sort_order_id": f.sort_order_id,
        }
        if self._version == 1:
            out["block_size_in_bytes"] = V1_BLOCK_SIZE
            return out
        out["content"] = int(f.content)
        out["equality_ids"] = None if f.equality_ids is None else list(f.equality_ids)
        out["referenced_data_file"] = f.referenced_data_file
        if self._version >= 3:
            out["first_row_id"] = None if f.is_delete else f.first_row_id
            out["content_offset"] = f.content_offset
            out["content_size_in_bytes"] = f.content_size_in_bytes
        elif f.file_format == FileFormat.PUFFIN:
            raise ValidationError(
                f"deletion vector {f.file_path} needs a format version 3 table "
                "(upgrade_format_version(3))"
            )
        return out


def _pairs(m: Mapping[int, Any] | None) -> list[dict[str, Any]] | None:
    return None if m is None else [{"key": k, "value": m[k]} for k in sorted(m)]


def _avro_value(t: IcebergType, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(t, DecimalType):
        unscaled = decimal_to_unscaled(value, t.scale)
        return unscaled_to_bytes(unscaled, decimal_required_bytes(t.precision))
    if isinstance(t, UUIDType):
        return to_bytes(t, value)
    return value


def _entry_reader(
    schema_text: str, schema: dict[str, Any], partition_type: StructType | None
) -> _EntryReader:
    """The decoder for ``schema`` (its text is the key: a table's manifests share a few
    schemas, and building a decoder costs as much as decoding a small manifest)."""
    key = (schema_text, partition_type)
    reader = _ENTRY_READERS.get(key)
    if reader is None:
        reader = _EntryReader(schema, partition_type)
        with _ENTRY_READERS_LOCK:
            if len(_ENTRY_READERS) >= 64:
                _ENTRY_READERS.pop(next(iter(_ENTRY_READERS)))
            _ENTRY_READERS[key] = reader
    return reader


class _EntryReader:
    """Decodes manifest_entry records of any version by field id (immutable once built,
    so one instance serves every manifest with its schema, from any thread)."""

    def __init__(self, schema: dict[str, Any], partition_type: StructType | None) -> None:
        named = avro.named_types(schema)
        self._entry = avro.RecordView(schema)
        self._file = self._entry.child(2, named)
        self._part = self._file.child(avro.PARTITION_ID, named)
        self._scales = _decimal_scales(self._part, named)
        ids = self._part.field_ids()
        self._order = [f.field_id for f in partition_type.fields] if partition_type else ids

    def decode(self, r: Mapping[str, Any], manifest: ManifestFile) -> ManifestEntry:
        e, f = self._entry, self._file
        raw = e.get(r, 2)
        status = ManifestEntryStatus(e.get(r, 0))
        content = f.get(raw, 134)
        content = DataFileContent(content if content is not None else 0)
        data_file = DataFile(
            content=content,
            file_path=f.get(raw, 100),
            file_format=FileFormat(str(f.get(raw, 101)).upper()),
            spec_id=manifest.partition_spec_id,
            partition=self._partition(f.get(raw, avro.PARTITION_ID) or {}),
            record_count=f.get(raw, 103),
            file_size_in_bytes=f.get(raw, 104),
            column_sizes=_map(f.get(raw, 108)),
            value_counts=_map(f.get(raw, 109)),
            null_value_counts=_map(f.get(raw, 110)),
            nan_value_counts=_map(f.get(raw, 137)),
            lower_bounds=_map(f.get(raw, 125)),
            upper_bounds=_map(f.get(raw, 128)),
            key_metadata=f.get(raw, 131),
            split_offsets=_tuple(f.get(raw, 132)),
            equality_ids=_tuple(f.get(raw, 135)),
            sort_order_id=f.get(raw, 140),
            referenced_data_file=f.get(raw, 143),
            first_row_id=f.get(raw, 142),
            content_offset=f.get(raw, 144),
            content_size_in_bytes=f.get(raw, 145),
        )
        return ManifestEntry(status, e.get(r, 1), e.get(r, 3), e.get(r, 4), data_file)

    def _partition(self, raw: Mapping[str, Any]) -> tuple[Any, ...]:
        out = []
        for fid in self._order:
            value = self._part.get(raw, fid)
            scale = self._scales.get(fid)
            if scale is not None and value is not None:
                value = unscaled_to_decimal(int.from_bytes(value, "big", signed=True), scale)
            out.append(value)
        return tuple(out)


def _decimal_scales(view: avro.RecordView, named: Mapping[str, Any]) -> dict[int, int]:
    """Field id -> scale for the partition fields that are Avro decimals."""
    out: dict[int, int] = {}
    for fid in view.field_ids():
        schema = avro.resolve(view.schema_of(fid), named)
        options: Iterable[Any] = schema if isinstance(schema, list) else [schema]
        for s in options:
            s = avro.resolve(s, named)
            if isinstance(s, dict) and s.get("logicalType") == "decimal":
                out[fid] = int(s.get("scale", 0))
    return out


def _map(value: Any) -> dict[int, Any] | None:
    return None if value is None else {int(k): v for k, v in avro.iter_pairs(value)}


def _tuple(value: Any) -> tuple[int, ...] | None:
    return None if value is None else tuple(int(v) for v in value)


# --- the manifests of a snapshot ------------------------------------------------------


def snapshot_manifests(io: FileIO, snapshot: Snapshot) -> list[ManifestFile]:
    """The manifests of ``snapshot``: its manifest list, or (format version 1 tables
    written by old writers) the manifests its metadata lists itself."""
    if snapshot.manifest_list or not snapshot.manifests:
        return read_manifest_list(io, snapshot.manifest_list)
    return [_embedded(io, location, snapshot.snapshot_id) for location in snapshot.manifests]


def _embedded(io: FileIO, location: str, snapshot_id: int) -> ManifestFile:
    """A manifest listed in v1 metadata, described as a manifest list would (its spec id
    from its header, its counts from its entries)."""
    contents = avro.read_avro_file(io, location)
    unknown = None
    bare = ManifestFile(
        manifest_path=location,
        manifest_length=io.size(location),
        partition_spec_id=int(contents.metadata.get("partition-spec-id", "0")),
        content=ManifestContent.DATA,
        sequence_number=0,
        min_sequence_number=0,
        added_snapshot_id=snapshot_id,
        added_files_count=unknown,
        existing_files_count=unknown,
        deleted_files_count=unknown,
        added_rows_count=unknown,
        existing_rows_count=unknown,
        deleted_rows_count=unknown,
    )
    entries = read_manifest(io, bare)

    def count(status: ManifestEntryStatus) -> tuple[int, int]:
        chosen = [e.data_file.record_count for e in entries if e.status == status]
        return len(chosen), sum(chosen)

    (added, added_rows), (existing, existing_rows), (deleted, deleted_rows) = (
        count(ManifestEntryStatus.ADDED),
        count(ManifestEntryStatus.EXISTING),
        count(ManifestEntryStatus.DELETED),
    )
    return replace(
        bare,
        added_files_count=added,
        existing_files_count=existing,
        deleted_files_count=deleted,
        added_rows_count=added_rows,
        existing_rows_count=existing_rows,
        deleted_rows_count=deleted_rows,
    )
