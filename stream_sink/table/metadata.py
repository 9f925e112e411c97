"""Table metadata (spec: "Table Metadata"): v1, v2 and v3 read and written.

Invariants:
- ``TableMetadata`` is an immutable value; every change returns a new one
  (``with_*`` methods), so a commit is "compute new metadata from base, then
  swap the pointer".
- ``last_sequence_number`` only grows; a snapshot added by a commit carries
  ``last_sequence_number + 1`` (v2).
- ``current_snapshot_id`` always equals the ``main`` ref's snapshot id.
- v3: ``next_row_id`` only grows; a snapshot takes it as its ``first-row-id`` and
  adding the snapshot raises it by the snapshot's ``added-rows`` (row lineage).
- A format version only goes up (``with_format_version``); an upgrade is a
  metadata-only change and rewrites no snapshot (an upgraded table starts
  ``next-row-id`` at 0 and its older snapshots keep no row ids).
- Serialization is deterministic and readable by Java Iceberg, pyiceberg and DuckDB.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

from stream_sink.exceptions import (
    DECODE_ERRORS,
    CorruptMetadataError,
    NoSuchRefError,
    NoSuchSnapshotError,
    UnsupportedError,
    ValidationError,
)
from stream_sink.table.partitioning import UNPARTITIONED_SPEC, PartitionSpec
from stream_sink.table.schema import Schema, check_types_for_version
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot, SnapshotRef
from stream_sink.table.sorting import UNSORTED_SORT_ORDER, SortOrder

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
NEWEST_FORMAT_VERSION = SUPPORTED_FORMAT_VERSIONS[-1]
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"


@dataclass(frozen=True)
class LogEntry:
    """A snapshot-log (``snapshot-id``) or metadata-log (``metadata-file``) entry."""

    timestamp_ms: int
    value: int | str


@dataclass(frozen=True)
class TableMetadata:
    format_version: int
    table_uuid: str
    location: str
    last_sequence_number: int
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    partition_specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    sort_orders: tuple[SortOrder, ...]
    default_sort_order_id: int
    properties: Mapping[str, str] = field(default_factory=dict)
    current_snapshot_id: int | None = None
    snapshots: tuple[Snapshot, ...] = ()
    snapshot_log: tuple[LogEntry, ...] = ()
    metadata_log: tuple[LogEntry, ...] = ()
    refs: Mapping[str, SnapshotRef] = field(default_factory=dict)
    #: v3 row lineage: higher than every row id assigned so far; None when a v3 table's
    #: metadata lacks it (its writer assigns no row ids): it reads, it takes no snapshot
    next_row_id: int | None = 0

    # --- lookups ----------------------------------------------------------------

    @property
    def schema(self) -> Schema:
        return self.schema_by_id(self.current_schema_id)

    def schema_by_id(self, schema_id: int) -> Schema:
        for s in self.schemas:
            if s.schema_id == schema_id:
                return s
        raise CorruptMetadataError(f"table {self.location} has no schema id {schema_id}")

    @property
    def spec(self) -> PartitionSpec:
        return self.spec_by_id(self.default_spec_id)

    def spec_by_id(self, spec_id: int) -> PartitionSpec:
        for s in self.partition_specs:
            if s.spec_id == spec_id:
                return s
        raise CorruptMetadataError(f"table {self.location} has no partition spec id {spec_id}")

    @property
    def sort_order(self) -> SortOrder:
        for o in self.sort_orders:
            if o.order_id == self.default_sort_order_id:
                return o
        return UNSORTED_SORT_ORDER

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot:
        for s in self.snapshots:
            if s.snapshot_id == snapshot_id:
                return s
        raise NoSuchSnapshotError(f"table {self.location} has no snapshot {snapshot_id}")

    def has_snapshot(self, snapshot_id: int) -> bool:
        return any(s.snapshot_id == snapshot_id for s in self.snapshots)

    def current_snapshot(self) -> Snapshot | None:
        if self.current_snapshot_id is None:
            return None
        return self.snapshot_by_id(self.current_snapshot_id)

    def snapshot_for_ref(self, ref: str) -> Snapshot | None:
        """Head snapshot of a branch or tag; None for a branch that has no commits yet
        (``main`` of an empty table). Unknown non-main refs raise NoSuchRefError."""
        r = self.refs.get(ref)
        if r is None:
            if ref == MAIN_BRANCH:
                return None
            raise NoSuchRefError(f"table {self.location} has no branch or tag {ref!r}")
        return self.snapshot_by_id(r.snapshot_id)

    def snapshot_as_of(self, timestamp_ms: int) -> Snapshot:
        """The snapshot current at ``timestamp_ms`` per the snapshot log."""
        best: int | None = None
        for entry in self.snapshot_log:
            if entry.timestamp_ms <= timestamp_ms:
                best = int(entry.value)
        if best is None:
            raise NoSuchSnapshotError(
                f"table {self.location} has no snapshot at or before {timestamp_ms} ms"
            )
        return self.snapshot_by_id(best)

    def ancestors(self, snapshot_id: int | None) -> Iterator[Snapshot]:
        """``snapshot_id`` then its parents, newest first, while they are still in metadata."""
        by_id = {s.snapshot_id: s for s in self.snapshots}
        current = by_id.get(snapshot_id) if snapshot_id is not None else None
        while current is not None:
            yield current
            pid = current.parent_snapshot_id
            current = by_id.get(pid) if pid is not None else None

    @property
    def next_sequence_number(self) -> int:
        return self.last_sequence_number + 1 if self.format_version >= 2 else 0

    def require_next_row_id(self) -> int:
        """The next row id a v3 snapshot takes; UnsupportedError saying what to do when the
        metadata lacks it (a new snapshot's row ids could repeat ones already taken)."""
        if self.next_row_id is not None:
            return self.next_row_id
        raise UnsupportedError(
            f"table {self.location}: its format version 3 metadata has no next-row-id (the "
            "writer that made it assigns no row ids), so the row ids of new rows cannot be "
            "chosen without repeating ones already taken: nothing was written. Reading it "
            "is unaffected. To write, let the writer that made the table commit to it (one "
            "that follows the spec adds next-row-id), or copy its rows into a new table "
            "(create_table, then append table.scan().to_arrow())"
        )

    # --- changes (each returns new metadata) -------------------------------------

    def with_snapshot(self, snapshot: Snapshot, branch: str = MAIN_BRANCH) -> TableMetadata:
        """Add ``snapshot`` and point ``branch`` at it (creating the branch)."""
        if self.has_snapshot(snapshot.snapshot_id):
            raise ValidationError(f"snapshot id {snapshot.snapshot_id} already exists")
        if self.format_version >= 2 and snapshot.sequence_number <= self.last_sequence_number:
            raise ValidationError(
                f"snapshot sequence number {snapshot.sequence_number} is not above "
                f"the table's last sequence number {self.last_sequence_number}"
            )
        next_row_id = self.next_row_id
        if self.format_version >= 3:
            taken = self.require_next_row_id()
            if snapshot.first_row_id is None or snapshot.first_row_id < taken:
                raise ValidationError(
                    f"snapshot {snapshot.snapshot_id} of a v3 table needs a first-row-id of "
                    f"at least the table's next-row-id {self.next_row_id}, "
                    f"got {snapshot.first_row_id}"
                )
            next_row_id = snapshot.first_row_id + (snapshot.added_rows or 0)
        refs = dict(self.refs)
        old = refs.get(branch)
        if old is not None and not old.is_branch:
            raise ValidationError(f"{branch!r} is a tag, not a branch")
        refs[branch] = (
            replace(old, snapshot_id=snapshot.snapshot_id)
            if old
            else SnapshotRef(snapshot.snapshot_id)
        )
        current = self.current_snapshot_id
        log = self.snapshot_log
        if branch == MAIN_BRANCH:
            current = snapshot.snapshot_id
            log = (*log, LogEntry(snapshot.timestamp_ms, snapshot.snapshot_id))
        return replace(
            self,
            snapshots=(*self.snapshots, snapshot),
            refs=refs,
            current_snapshot_id=current,
            snapshot_log=log,
            last_sequence_number=max(self.last_sequence_number, snapshot.sequence_number),
            last_updated_ms=max(snapshot.timestamp_ms, self.last_updated_ms),
            next_row_id=next_row_id,
        )

    def with_format_version(self, version: int) -> TableMetadata:
        """The same table in format ``version`` (metadata only: no snapshot changes).

        Going down is refused, as is a version this library does not write; the same
        version returns ``self``. An upgrade to v3 starts ``next-row-id`` at 0."""
        if version == self.format_version:
            return self
        if version < self.format_version:
            raise ValidationError(
                f"table {self.location} is format version {self.format_version}; "
                f"a format version cannot be downgraded (to {version})"
            )
        if version not in SUPPORTED_FORMAT_VERSIONS:
            raise UnsupportedError(_unsupported_version(version))
        return replace(self, format_version=version, last_updated_ms=_now(), next_row_id=0)

    def with_ref(self, name: str, ref: SnapshotRef) -> TableMetadata:
        self.snapshot_by_id(ref.snapshot_id)
        refs = dict(self.refs)
        refs[name] = ref
        current = ref.snapshot_id if name == MAIN_BRANCH else self.current_snapshot_id
        return replace(self, refs=refs, current_snapshot_id=current, last_updated_ms=_now())

    def with_properties(
        self, updates: Mapping[str, str], removals: tuple[str, ...] = ()
    ) -> TableMetadata:
        props = {k: v for k, v in self.properties.items() if k not in removals}
        props.update({str(k): str(v) for k, v in updates.items()})
        return replace(self, properties=props, last_updated_ms=_now())

    def with_schema(self, schema: Schema) -> TableMetadata:
        """Add ``schema`` (reusing an identical one) and make it current."""
        for s in self.schemas:
            if s.same_structure(schema):
                return replace(self, current_schema_id=s.schema_id, last_updated_ms=_now())
        check_types_for_version(schema, self.format_version, self.location)
        new_id = max(s.schema_id for s in self.schemas) + 1
        schema = schema.with_schema_id(new_id)
        return replace(
            self,
            schemas=(*self.schemas, schema),
            current_schema_id=new_id,
            last_column_id=max(self.last_column_id, schema.highest_field_id),
            last_updated_ms=_now(),
        )

    def with_spec(self, spec: PartitionSpec) -> TableMetadata:
        """Add ``spec`` (reusing a compatible one) and make it the default."""
        for s in self.partition_specs:
            if s.compatible_with(spec):
                return replace(self, default_spec_id=s.spec_id, last_updated_ms=_now())
        new_id = max(s.spec_id for s in self.partition_specs) + 1
        spec = PartitionSpec(new_id, spec.fields)
        return replace(
            self,
            partition_specs=(*self.partition_specs, spec),
            default_spec_id=new_id,
            last_partition_id=max(self.last_partition_id, spec.last_assigned_field_id),
            last_updated_ms=_now(),
        )

    def with_metadata_log_entry(self, previous_location: str, previous_ms: int) -> TableMetadata:
        """Record the metadata file this version replaces, keeping the newest
        ``write.metadata.previous-versions-max`` entries (default 100)."""
        keep = int(self.properties.get(PREVIOUS_VERSIONS_MAX, "100"))
        log = (*self.metadata_log, LogEntry(previous_ms, previous_location))
        return replace(self, metadata_log=log[-keep:] if keep > 0 else ())

    # --- JSON --------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        v = self.format_version
        out: dict[str, Any] = {
            "format-version": v,
            "table-uuid": self.table_uuid,
            "location": self.location,
        }
        if v >= 2:
            out["last-sequence-number"] = self.last_sequence_number
        if v >= 3 and self.next_row_id is not None:
            out["next-row-id"] = self.next_row_id
        out["last-updated-ms"] = self.last_updated_ms
        out["last-column-id"] = self.last_column_id
        if v == 1:
            out["schema"] = self.schema.to_json()
            out["partition-spec"] = self.spec.to_json()["fields"]
        out["current-schema-id"] = self.current_schema_id
        out["schemas"] = [s.to_json() for s in self.schemas]
        out["default-spec-id"] = self.default_spec_id
        out["partition-specs"] = [s.to_json() for s in self.partition_specs]
        out["last-partition-id"] = self.last_partition_id
        out["default-sort-order-id"] = self.default_sort_order_id
        out["sort-orders"] = [o.to_json() for o in self.sort_orders]
        out["properties"] = dict(self.properties)
        out["current-snapshot-id"] = (
            self.current_snapshot_id if self.current_snapshot_id is not None else -1
        )
        out["refs"] = {k: r.to_json() for k, r in self.refs.items()}
        out["snapshots"] = [s.to_json(v) for s in self.snapshots]
        out["statistics"] = []
        out["partition-statistics"] = []
        out["snapshot-log"] = [
            {"timestamp-ms": e.timestamp_ms, "snapshot-id": e.value} for e in self.snapshot_log
        ]
        out["metadata-log"] = [
            {"timestamp-ms": e.timestamp_ms, "metadata-file": e.value} for e in self.metadata_log
        ]
        return out


def _now() -> int:
    return int(time.time() * 1000)


def new_table_metadata(
    schema: Schema,
    spec: PartitionSpec,
    sort_order: SortOrder,
    location: str,
    properties: Mapping[str, str] | None = None,
    format_version: int = 2,
) -> TableMetadata:
    """Metadata of a new, empty table (no snapshots)."""
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise ValidationError(f"format version {format_version} is not supported (1, 2 or 3)")
    check_types_for_version(schema, format_version, location)
    schema = schema.with_schema_id(0)
    spec = PartitionSpec(0, spec.fields)
    props = {str(k): str(v) for k, v in (properties or {}).items()}
    props.pop("format-version", None)
    return TableMetadata(
        format_version=format_version,
        table_uuid=str(uuid.uuid4()),
        location=location.rstrip("/"),
        last_sequence_number=0,
        last_updated_ms=_now(),
        last_column_id=schema.highest_field_id,
        schemas=(schema,),
        current_schema_id=0,
        partition_specs=(spec,),
        default_spec_id=0,
        last_partition_id=max(spec.last_assigned_field_id, 999),
        sort_orders=(sort_order,),
        default_sort_order_id=sort_order.order_id,
        properties=props,
    )


def parse_metadata(text: str | bytes, where: str = "<metadata>") -> TableMetadata:
    """Parse a metadata JSON file; malformed input raises CorruptMetadataError naming ``where``."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:  # numbers of 4,300 digits too, nesting
        raise CorruptMetadataError(f"metadata file {where} is not valid JSON: {e}") from e
    if not isinstance(obj, dict):
        raise CorruptMetadataError(f"metadata file {where} is not a JSON object")
    try:
        return _from_dict(obj)
    except CorruptMetadataError as e:
        raise CorruptMetadataError(f"metadata file {where}: {e}") from e
    except UnsupportedError as e:
        raise UnsupportedError(f"metadata file {where}: {e}") from e
    except DECODE_ERRORS as e:
        raise CorruptMetadataError(f"metadata file {where} is malformed: missing or bad {e}") from e


def _from_dict(obj: dict[str, Any]) -> TableMetadata:
    version = int(obj["format-version"])
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedError(_unsupported_version(version))
    schemas, current_schema_id = _schemas(obj)
    specs, default_spec_id = _specs(obj)
    orders = tuple(SortOrder.from_json(o) for o in obj.get("sort-orders", [])) or (
        UNSORTED_SORT_ORDER,
    )
    snapshots = tuple(Snapshot.from_json(s) for s in obj.get("snapshots") or [])
    current = obj.get("current-snapshot-id")
    current = None if current is None or int(current) == -1 else int(current)
    refs = {str(k): SnapshotRef.from_json(r) for k, r in (obj.get("refs") or {}).items()}
    if current is not None and MAIN_BRANCH not in refs:
        refs[MAIN_BRANCH] = SnapshotRef(current)
    last_partition_id = obj.get("last-partition-id")
    if last_partition_id is None:
        last_partition_id = max((s.last_assigned_field_id for s in specs), default=999)
    return TableMetadata(
        format_version=version,
        table_uuid=str(obj.get("table-uuid") or uuid.uuid4()),
        location=str(obj["location"]).rstrip("/"),
        last_sequence_number=int(obj.get("last-sequence-number", 0)),
        last_updated_ms=int(obj["last-updated-ms"]),
        last_column_id=int(obj["last-column-id"]),
        schemas=schemas,
        current_schema_id=current_schema_id,
        partition_specs=specs,
        default_spec_id=default_spec_id,
        last_partition_id=int(last_partition_id),
        sort_orders=orders,
        default_sort_order_id=int(obj.get("default-sort-order-id", orders[0].order_id)),
        properties={str(k): str(v) for k, v in (obj.get("properties") or {}).items()},
        current_snapshot_id=current,
        snapshots=snapshots,
        snapshot_log=tuple(
            LogEntry(int(e["timestamp-ms"]), int(e["snapshot-id"]))
            for e in obj.get("snapshot-log") or []
        ),
        metadata_log=tuple(
            LogEntry(int(e["timestamp-ms"]), str(e["metadata-file"]))
            for e in obj.get("metadata-log") or []
        ),
        refs=refs,
        next_row_id=_next_row_id(obj, version),
    )


def _next_row_id(obj: dict[str, Any], version: int) -> int | None:
    """v3's next-row-id; None when the metadata lacks it, which only a writer needs (see
    :meth:`TableMetadata.require_next_row_id`)."""
    if version < 3:
        return 0
    raw = obj.get("next-row-id")
    return None if raw is None else int(raw)


def _unsupported_version(version: int) -> str:
    """Why a table of format ``version`` is refused, and what would read it."""
    if version > NEWEST_FORMAT_VERSION:
        return (
            f"Iceberg format version {version} is newer than any this library knows "
            "(1, 2 and 3 are supported): nothing was read or changed; the table needs a "
            "newer reader"
        )
    return f"format-version {version} is not an Iceberg format version (1, 2 and 3 are)"


def _schemas(obj: dict[str, Any]) -> tuple[tuple[Schema, ...], int]:
    if "schemas" in obj:
        schemas = tuple(Schema.from_json(s) for s in obj["schemas"])
        return schemas, int(obj.get("current-schema-id", schemas[-1].schema_id))
    schema = Schema.from_json(obj["schema"])
    return (schema,), schema.schema_id


def _specs(obj: dict[str, Any]) -> tuple[tuple[PartitionSpec, ...], int]:
    if "partition-specs" in obj:
        specs = tuple(PartitionSpec.from_json(s) for s in obj["partition-specs"])
        return specs or (UNPARTITIONED_SPEC,), int(obj.get("default-spec-id", 0))
    fields = []
    for i, f in enumerate(obj.get("partition-spec") or []):
        fields.append({**f, "field-id": f.get("field-id", 1000 + i)})
    return (PartitionSpec.from_json({"spec-id": 0, "fields": fields}),), 0
