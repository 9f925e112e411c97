"""Iceberg schemas: a struct of id'd fields plus identifier (primary key) fields.

Invariants:
- Field ids are unique across the whole schema, nested fields included.
- Identifier fields are required primitive top-level-reachable fields (spec:
  not inside lists or maps, not float/double).
- A schema is immutable; evolution produces a new Schema with a new schema id.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Iterator

from stream_sink.exceptions import CorruptMetadataError, SchemaMismatchError, ValidationError
from stream_sink.table.types import (
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UnknownType,
    UUIDType,
    child_fields,
    field_from_json,
    field_to_json,
    v3_types_in,
)


@dataclass(frozen=True)
class Schema:
    fields: tuple[NestedField, ...]
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = ()

    def __init__(
        self,
        *fields: NestedField,
        schema_id: int = 0,
        identifier_field_ids: Iterable[int] = (),
    ) -> None:
        object.__setattr__(self, "fields", tuple(fields))
        object.__setattr__(self, "schema_id", schema_id)
        object.__setattr__(self, "identifier_field_ids", tuple(identifier_field_ids))
        self._validate()

    # --- indexes ----------------------------------------------------------

    def as_struct(self) -> StructType:
        return StructType(*self.fields)

    @cached_property
    def _by_id(self) -> dict[int, NestedField]:
        return {f.field_id: f for f, _ in _walk(self.fields, ())}

    @cached_property
    def _by_name(self) -> dict[str, NestedField]:
        return {".".join(path): f for f, path in _walk(self.fields, ())}

    @cached_property
    def _name_by_id(self) -> dict[int, str]:
        return {f.field_id: ".".join(path) for f, path in _walk(self.fields, ())}

    def _validate(self) -> None:
        seen: set[int] = set()
        for f, path in _walk(self.fields, ()):
            if f.field_id in seen:
                raise ValidationError(f"duplicate field id {f.field_id} at {'.'.join(path)}")
            seen.add(f.field_id)
            if isinstance(f.field_type, UnknownType):
                _check_unknown(f, ".".join(path))
        for fid in self.identifier_field_ids:
            key = self._by_id.get(fid)
            if key is None:
                raise ValidationError(f"identifier field id {fid} is not in the schema")
            f = key
            if not isinstance(f.field_type, PrimitiveType) or isinstance(
                f.field_type, (FloatType, DoubleType)
            ):
                raise ValidationError(
                    f"identifier field {f.name!r} must be a primitive other than float/double, "
                    f"got {f.field_type}"
                )
            if not f.required:
                raise ValidationError(f"identifier field {f.name!r} must be required")
            if fid in self._in_collection:
                raise ValidationError(f"identifier field {f.name!r} is inside a list or map")

    # --- lookups ----------------------------------------------------------

    def find_field(self, name_or_id: str | int) -> NestedField:
        """The field by dotted name or id; raises ValidationError naming it when absent."""
        f = (
            self._by_id.get(name_or_id)
            if isinstance(name_or_id, int)
            else self._by_name.get(name_or_id)
        )
        if f is None:
            raise ValidationError(f"no field {name_or_id!r} in schema {self.column_names}")
        return f

    def find_type(self, name_or_id: str | int) -> IcebergType:
        return self.find_field(name_or_id).field_type

    def find_column_name(self, field_id: int) -> str:
        try:
            return self._name_by_id[field_id]
        except KeyError:
            raise ValidationError(f"no field id {field_id} in schema") from None

    def has_field(self, name_or_id: str | int) -> bool:
        return (
            name_or_id in self._by_id
            if isinstance(name_or_id, int)
            else name_or_id in self._by_name
        )

    @property
    def column_names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def identifier_field_names(self) -> list[str]:
        return [self.find_column_name(i) for i in self.identifier_field_ids]

    @property
    def highest_field_id(self) -> int:
        return max(self._by_id, default=0)

    def leaf_fields(self) -> Iterator[NestedField]:
        """Every primitive field, depth first (the columns of a Parquet file)."""
        for f, _ in _walk(self.fields, ()):
            if isinstance(f.field_type, PrimitiveType):
                yield f

    def primitive_field_ids_outside_collections(self) -> list[int]:
        """Primitive fields not inside a list or map: those that get column bounds."""
        return [f.field_id for f in self.leaf_fields() if f.field_id not in self._in_collection]

    @cached_property
    def _in_collection(self) -> frozenset[int]:
        out: set[int] = set()

        def mark(t: IcebergType, inside: bool) -> None:
            for child in child_fields(t):
                now = inside or isinstance(t, (ListType, MapType))
                if now:
                    out.add(child.field_id)
                mark(child.field_type, now)

        mark(self.as_struct(), False)
        return frozenset(out)

    def select(self, names: Iterable[str]) -> Schema:
        """A schema of the named top-level columns, in the given order."""
        wanted = list(names)
        by_name = {f.name: f for f in self.fields}
        missing = [n for n in wanted if n not in by_name]
        if missing:
            raise ValidationError(f"unknown columns {missing}; schema has {self.column_names}")
        ids = [i for i in self.identifier_field_ids if self.find_column_name(i) in wanted]
        return Schema(
            *(by_name[n] for n in wanted), schema_id=self.schema_id, identifier_field_ids=ids
        )

    def with_identifier_fields(self, names: Iterable[str]) -> Schema:
        ids = [self.find_field(n).field_id for n in names]
        return Schema(*self.fields, schema_id=self.schema_id, identifier_field_ids=ids)

    def with_schema_id(self, schema_id: int) -> Schema:
        return Schema(
            *self.fields, schema_id=schema_id, identifier_field_ids=self.identifier_field_ids
        )

    def same_structure(self, other: Schema) -> bool:
        """Equal fields and identifier fields, whatever the schema ids."""
        return self.fields == other.fields and set(self.identifier_field_ids) == set(
            other.identifier_field_ids
        )

    # --- JSON ---------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "struct",
            "schema-id": self.schema_id,
            "fields": [field_to_json(f) for f in self.fields],
        }
        if self.identifier_field_ids:
            out["identifier-field-ids"] = list(self.identifier_field_ids)
        return out

    @staticmethod
    def from_json(obj: Any) -> Schema:
        if not isinstance(obj, dict) or "fields" not in obj:
            raise CorruptMetadataError(f"schema is not a struct object: {str(obj)[:200]}")
        try:
            return Schema(
                *(field_from_json(f) for f in obj["fields"]),
                schema_id=int(obj.get("schema-id", 0)),
                identifier_field_ids=[int(i) for i in obj.get("identifier-field-ids", [])],
            )
        except ValidationError as e:
            raise CorruptMetadataError(f"invalid schema: {e}") from e

    def __str__(self) -> str:
        lines = [f"  {f}" for f in self.fields]
        return "table {\n" + "\n".join(lines) + "\n}"


def _walk(
    fields: tuple[NestedField, ...], path: tuple[str, ...]
) -> Iterator[tuple[NestedField, tuple[str, ...]]]:
    for f in fields:
        p = (*path, f.name)
        yield f, p
        yield from _walk(child_fields(f.field_type), p)


def _check_unknown(f: NestedField, path: str) -> None:
    """The spec: an ``unknown`` column is optional and defaults to null."""
    if f.required:
        raise ValidationError(f"column {path!r} of type unknown must be optional (it is null)")
    if f.initial_default is not None or f.write_default is not None:
        raise ValidationError(f"column {path!r} of type unknown cannot have a non-null default")


def check_types_for_version(schema: Schema, format_version: int, where: str) -> None:
    """Raise ValidationError when ``schema`` holds a type ``format_version`` lacks
    (``timestamp_ns``, ``timestamptz_ns`` and ``unknown`` need format version 3)."""
    if format_version >= 3:
        return
    found = [(f.name, v3_types_in(f.field_type)) for f in schema.fields]
    named = [f"{name!r} ({', '.join(types)})" for name, types in found if types]
    if named:
        raise ValidationError(
            f"table {where} is format version {format_version}, but columns {', '.join(named)} "
            "have types added in format version 3: create the table with format_version=3 "
            "or upgrade it first (upgrade_format_version(3))"
        )


def check_compatible_write(table_schema: Schema, data_schema: Schema, where: str) -> None:
    """Raise SchemaMismatchError when ``data_schema`` cannot be written into ``table_schema``.

    Columns are matched by name. Allowed: the same type, or a safe widening
    (int→long, float→double, decimal(P,S)→decimal(P',S) with P' ≥ P); an optional
    data column into a required table column is refused (it could hold nulls).
    ``where`` names the table in messages.
    """
    from stream_sink.table.promotion import is_safe_promotion

    problems: list[str] = []
    data_by_name = {f.name: f for f in data_schema.fields}
    table_names = {f.name for f in table_schema.fields}
    for extra in sorted(set(data_by_name) - table_names):
        problems.append(f"column {extra!r} is not in the table")
    for tf in table_schema.fields:
        df = data_by_name.get(tf.name)
        if df is None:
            if tf.required and tf.write_default is None:
                problems.append(f"required column {tf.name!r} is missing")
            continue
        problems.extend(_field_problems(tf, df, tf.name, is_safe_promotion))
    if problems:
        raise SchemaMismatchError(f"data does not match table {where}: " + "; ".join(problems))


def _field_problems(tf: NestedField, df: NestedField, path: str, promote: Any) -> list[str]:
    out: list[str] = []
    if tf.required and not df.required:
        out.append(f"column {path!r} is required in the table but nullable in the data")
    tt, dt = tf.field_type, df.field_type
    if isinstance(tt, StructType) and isinstance(dt, StructType):
        by_name = {f.name: f for f in dt.fields}
        for extra in sorted(set(by_name) - {f.name for f in tt.fields}):
            out.append(f"column {path + '.' + extra!r} is not in the table")
        for child in tt.fields:
            d = by_name.get(child.name)
            if d is None:
                if child.required:
                    out.append(f"required column {path + '.' + child.name!r} is missing")
                continue
            out.extend(_field_problems(child, d, f"{path}.{child.name}", promote))
    elif isinstance(tt, ListType) and isinstance(dt, ListType):
        out.extend(_field_problems(tt.element_field, dt.element_field, f"{path}.element", promote))
    elif isinstance(tt, MapType) and isinstance(dt, MapType):
        out.extend(_field_problems(tt.key_field, dt.key_field, f"{path}.key", promote))
        out.extend(_field_problems(tt.value_field, dt.value_field, f"{path}.value", promote))
    elif (
        tt != dt
        and not promote(dt, tt)
        and not _uuid_as_fixed(tt, dt)
        and not _same_instants(tt, dt)
        and not isinstance(dt, UnknownType)
    ):
        out.append(f"column {path!r} has type {dt} in the data but {tt} in the table")
    return out


_MICROS_OF: dict[type, type] = {
    TimestampNanoType: TimestampType,
    TimestamptzNanoType: TimestamptzType,
}


def _same_instants(table_type: IcebergType, data_type: IcebergType) -> bool:
    """Microsecond data into a nanosecond column of the same zone kind (exact), and
    nanosecond data, which Arrow data always reads as a microsecond type here, into it."""
    micros = _MICROS_OF.get(type(table_type))
    return micros is not None and type(data_type) is micros


def _uuid_as_fixed(table_type: IcebergType, data_type: IcebergType) -> bool:
    """Arrow holds uuids as fixed_size_binary(16) (the table's own Arrow form), which
    reads back as fixed[16]: accepted for a uuid column."""
    return isinstance(table_type, UUIDType) and data_type == FixedType(16)
