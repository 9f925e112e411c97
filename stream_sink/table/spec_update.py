"""Partition-spec evolution (spec: "Partition Evolution"), in pyiceberg's shape::

    with table.update_spec() as u:
        u.add_field("ts", "day")
        u.remove_field("category")

Invariants:
- The result becomes the table's default spec under a new spec id (an equal earlier
  spec is reused); earlier specs stay in the metadata, so files written with them
  stay readable. New files are written with the default spec.
- A field added again with a (source, transform) an earlier spec had gets that
  field's id back (as Java does); otherwise ids continue after ``last-partition-id``.
- Removing a field drops it from the spec (v2); v1 tables keep it as ``void``.
- The commit re-applies the changes to the refreshed table on each attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from stream_sink.exceptions import ValidationError
from stream_sink.table.partitioning import PartitionField, PartitionSpec, build_partition_spec
from stream_sink.table.transforms import Bucket, Transform, Truncate, Void, parse_transform

if TYPE_CHECKING:
    from stream_sink.table.metadata import TableMetadata
    from stream_sink.table.table import Table

SpecChange = Callable[["TableMetadata", list[PartitionField]], list[PartitionField]]


class UpdateSpec:
    """Collects partition-spec changes of ``table``; commits them as one metadata change."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._changes: list[SpecChange] = []
        self._preview = list(table.metadata.spec.fields)

    def _record(self, change: SpecChange) -> UpdateSpec:
        self._preview = change(self._table.metadata, self._preview)
        self._changes.append(change)
        return self

    def add_field(
        self, source_column: str, transform: Transform | str = "identity", name: str | None = None
    ) -> UpdateSpec:
        """Partition new files by ``transform(source_column)`` too (name: Java's default)."""
        t = transform if isinstance(transform, Transform) else parse_transform(transform)
        return self._record(lambda meta, fields: _add(meta, fields, source_column, t, name))

    def add_identity(self, source_column: str) -> UpdateSpec:
        return self.add_field(source_column, "identity")

    def remove_field(self, name: str) -> UpdateSpec:
        return self._record(lambda meta, fields: _remove(meta, fields, name))

    def rename_field(self, name: str, new_name: str) -> UpdateSpec:
        def rename(meta: TableMetadata, fields: list[PartitionField]) -> list[PartitionField]:
            _field(fields, name)
            if any(f.name == new_name for f in fields):
                raise ValidationError(
                    f"cannot rename partition field {name!r} to {new_name!r}: that name exists"
                )
            return [replace(f, name=new_name) if f.name == name else f for f in fields]

        return self._record(rename)

    def apply(self) -> PartitionSpec:
        meta = self._table.metadata
        return PartitionSpec(meta.default_spec_id, tuple(self._preview)).bind(meta.schema)

    def commit(self) -> PartitionSpec:
        from stream_sink.table.metadata_commit import commit_metadata_change

        return commit_metadata_change(self._table, self._changed_metadata).spec

    def _changed_metadata(self, base: TableMetadata) -> TableMetadata | None:
        fields = list(base.spec.fields)
        for change in self._changes:
            fields = change(base, fields)
        spec = PartitionSpec(0, tuple(fields)).bind(base.schema)
        if spec.compatible_with(base.spec):
            return None
        return base.with_spec(spec)

    def __enter__(self) -> UpdateSpec:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.commit()


def _field(fields: list[PartitionField], name: str) -> PartitionField:
    for f in fields:
        if f.name == name:
            return f
    raise ValidationError(f"no partition field {name!r}; the spec has {[f.name for f in fields]}")


def _add(
    meta: TableMetadata,
    fields: list[PartitionField],
    column: str,
    transform: Transform,
    name: str | None,
) -> list[PartitionField]:
    schema = meta.schema
    args: tuple[Any, ...]
    if isinstance(transform, (Bucket, Truncate)):
        args = (_kind(transform), column, _width(transform))
    else:
        args = (str(transform), column)
    if name is not None:
        args = (*args, name)
    candidate = build_partition_spec(schema, [args]).fields[0]
    for f in fields:
        if f.source_id == candidate.source_id and str(f.transform) == str(transform):
            raise ValidationError(
                f"partition field {f.name!r} already partitions {column!r} by {transform}"
            )
        if f.name == candidate.name:
            raise ValidationError(f"partition field name {f.name!r} is already used")
    field_id = _recycled_id(meta, candidate) or _next_id(meta, fields)
    new = replace(candidate, field_id=field_id)
    build_partition_spec(schema, PartitionSpec(0, (*fields, new)))  # checks the whole spec
    return [*fields, new]


def _kind(t: Transform) -> str:
    return "bucket" if isinstance(t, Bucket) else "truncate"


def _width(t: Transform) -> int:
    if isinstance(t, Bucket):
        return t.num_buckets
    assert isinstance(t, Truncate)
    return t.width


def _recycled_id(meta: TableMetadata, f: PartitionField) -> int | None:
    for spec in meta.partition_specs:
        for old in spec.fields:
            if old.source_id == f.source_id and str(old.transform) == str(f.transform):
                return old.field_id
    return None


def _next_id(meta: TableMetadata, fields: list[PartitionField]) -> int:
    used = [meta.last_partition_id, *(f.field_id for f in fields)]
    return max(used) + 1


def _remove(meta: TableMetadata, fields: list[PartitionField], name: str) -> list[PartitionField]:
    f = _field(fields, name)
    if meta.format_version == 1:
        return [replace(x, transform=Void()) if x is f else x for x in fields]
    return [x for x in fields if x is not f]
