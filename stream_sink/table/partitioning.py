"""Partition specs (spec: "Partitioning"; JSON per Appendix C).

Invariants:
- A spec is an immutable value; equality ignores the schema it may be bound to.
- Partition field ids are unique within a spec and, by convention, start at 1000
  (the spec's v1 rule, kept by Java for v2); ``last_assigned_field_id`` of an
  unpartitioned spec is 999.
- ``build_partition_spec`` assigns names and checks conflicts exactly as Java's
  ``PartitionSpec.Builder`` does, so specs built here and there are equal.
- ``partition_path`` gives the directory string of Java's
  ``PartitionSpec.partitionToPath`` for a tuple of internal values (see
  :mod:`stream_sink.table.values`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

import pyarrow as pa

from stream_sink.exceptions import CorruptMetadataError, InvalidTransformError, ValidationError
from stream_sink.table.schema import Schema
from stream_sink.table.transforms import (
    Bucket,
    Identity,
    Transform,
    Truncate,
    Void,
    parse_transform,
)
from stream_sink.table.types import IcebergType, NestedField, PrimitiveType, StructType

PARTITION_DATA_ID_START = 1000
_FIELD_ID_KEY = b"PARQUET:field_id"


@dataclass(frozen=True)
class PartitionField:
    source_id: int
    field_id: int
    transform: Transform
    name: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transform": str(self.transform),
            "source-id": self.source_id,
            "field-id": self.field_id,
        }

    def __str__(self) -> str:
        return f"{self.field_id}: {self.name}: {self.transform}({self.source_id})"


@dataclass(frozen=True)
class PartitionSpec:
    """An ordered tuple of partition fields, optionally bound to the schema it was built for."""

    spec_id: int
    fields: tuple[PartitionField, ...] = ()
    schema: Schema | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        ids = [f.field_id for f in self.fields]
        if len(set(ids)) != len(ids):
            raise ValidationError(f"partition spec {self.spec_id} repeats field ids: {ids}")

    @property
    def is_unpartitioned(self) -> bool:
        """No fields, or only void ones: every row lands in the same partition."""
        return all(isinstance(f.transform, Void) for f in self.fields)

    @property
    def last_assigned_field_id(self) -> int:
        return max((f.field_id for f in self.fields), default=PARTITION_DATA_ID_START - 1)

    def bind(self, schema: Schema) -> PartitionSpec:
        """This spec, checked against and bound to ``schema``."""
        for f in self.fields:
            _source_type(schema, f)
        return replace(self, schema=schema)

    def partition_type(self, schema: Schema | None = None) -> StructType:
        """The partition tuple's struct: field ids are partition field ids, all optional."""
        s = self._schema(schema)
        return StructType(
            *(
                NestedField(f.field_id, f.name, f.transform.result_type(_source_type(s, f)))
                for f in self.fields
            )
        )

    def source_types(self, schema: Schema | None = None) -> list[IcebergType]:
        s = self._schema(schema)
        return [_source_type(s, f) for f in self.fields]

    def compute(
        self, table: pa.Table | pa.RecordBatch, schema: Schema | None = None
    ) -> list[pa.Array]:
        """One transformed array per partition field, for every row of ``table``."""
        s = self._schema(schema)
        out = []
        for f in self.fields:
            source = _source_type(s, f)
            column = _source_column(table, s, f.source_id)
            try:
                out.append(f.transform.apply(column, source))
            except InvalidTransformError as e:
                name = s.find_column_name(f.source_id)
                raise InvalidTransformError(
                    f"partition field {f.name!r} on column {name!r}: {e}"
                ) from e
        return out

    def partition_path(self, values: Sequence[Any], schema: Schema | None = None) -> str:
        """Java's ``partitionToPath``: ``name=value`` pairs, URL-encoded, joined by ``/``."""
        if len(values) != len(self.fields):
            raise ValidationError(
                f"partition tuple {tuple(values)!r} has {len(values)} values, "
                f"spec {self.spec_id} has {len(self.fields)} fields"
            )
        parts = []
        for f, value in zip(self.fields, values, strict=True):
            human = f.transform.to_human_string(self._type_for_human(f, schema), value)
            parts.append(f"{java_url_encode(f.name)}={java_url_encode(human)}")
        return "/".join(parts)

    def compatible_with(self, other: PartitionSpec) -> bool:
        """Same fields in the same order (source, transform, name), field ids ignored."""
        if len(self.fields) != len(other.fields):
            return False
        return all(
            a.source_id == b.source_id and str(a.transform) == str(b.transform) and a.name == b.name
            for a, b in zip(self.fields, other.fields, strict=True)
        )

    def to_json(self) -> dict[str, Any]:
        return {"spec-id": self.spec_id, "fields": self.fields_to_json()}

    def fields_to_json(self) -> list[dict[str, Any]]:
        """Only the field list: the form manifests store under ``partition-spec``."""
        return [f.to_json() for f in self.fields]

    @staticmethod
    def from_json(obj: Any, schema: Schema | None = None) -> PartitionSpec:
        """A spec object, or a bare field list (spec id 0, ids from 1000 when absent)."""
        if isinstance(obj, list):
            spec_id, raw_fields = 0, obj
        elif isinstance(obj, dict) and isinstance(obj.get("fields"), list):
            spec_id, raw_fields = obj.get("spec-id", 0), obj["fields"]
        else:
            raise CorruptMetadataError(f"partition spec is not an object with fields: {obj!r:.200}")
        if not isinstance(spec_id, int):
            raise CorruptMetadataError(f"partition spec id is not an int: {spec_id!r}")
        fields = tuple(_field_from_json(f, i) for i, f in enumerate(raw_fields))
        try:
            spec = PartitionSpec(spec_id, fields)
        except ValidationError as e:
            raise CorruptMetadataError(str(e)) from e
        return spec.bind(schema) if schema is not None else spec

    def __str__(self) -> str:
        return "[" + ", ".join(str(f) for f in self.fields) + "]"

    def _schema(self, schema: Schema | None) -> Schema:
        s = schema if schema is not None else self.schema
        if s is None:
            raise ValidationError(f"partition spec {self.spec_id} is not bound to a schema")
        return s

    def _type_for_human(self, f: PartitionField, schema: Schema | None) -> IcebergType:
        if isinstance(f.transform, (Identity, Truncate)):
            return _source_type(self._schema(schema), f)
        s = schema if schema is not None else self.schema
        if s is not None and s.has_field(f.source_id):
            return s.find_type(f.source_id)
        return _ANY_SOURCE  # bucket, dates, void: the text does not depend on the source


_ANY_SOURCE = PrimitiveType()
UNPARTITIONED_SPEC = PartitionSpec(0, ())


def _field_from_json(obj: Any, position: int) -> PartitionField:
    if not isinstance(obj, dict):
        raise CorruptMetadataError(f"partition field is not an object: {obj!r:.200}")
    try:
        source_id = obj["source-id"] if "source-id" in obj else _single(obj["source-ids"])
        field_id = obj.get("field-id", PARTITION_DATA_ID_START + position)
        name, transform = obj["name"], parse_transform(obj["transform"])
    except KeyError as e:
        raise CorruptMetadataError(f"partition field {obj!r:.200} lacks {e}") from e
    except InvalidTransformError as e:
        raise CorruptMetadataError(f"partition field {obj!r:.200}: {e}") from e
    if not (isinstance(source_id, int) and isinstance(field_id, int) and isinstance(name, str)):
        raise CorruptMetadataError(f"partition field {obj!r:.200} has fields of the wrong type")
    return PartitionField(source_id, field_id, transform, name)


def _single(ids: Any) -> int:
    if isinstance(ids, list) and len(ids) == 1:
        return int(ids[0])
    raise CorruptMetadataError(f"multi-argument transforms are not supported: source-ids {ids!r}")


def _source_type(schema: Schema, f: PartitionField) -> IcebergType:
    if not schema.has_field(f.source_id):
        raise ValidationError(
            f"partition field {f.name!r}: source field id {f.source_id} is not in the schema"
        )
    source = schema.find_type(f.source_id)
    if not f.transform.can_transform(source):
        name = schema.find_column_name(f.source_id)
        raise InvalidTransformError(
            f"partition field {f.name!r}: transform {f.transform} cannot be applied to "
            f"column {name!r} of type {source}"
        )
    return source


def _source_column(table: pa.Table | pa.RecordBatch, schema: Schema, source_id: int) -> pa.Array:
    """The source column: by ``PARQUET:field_id`` when the Arrow schema has ids, else by name."""
    for i, f in enumerate(table.schema):
        if f.metadata and f.metadata.get(_FIELD_ID_KEY) == str(source_id).encode():
            return _plain(table.column(i))
    path = schema.find_column_name(source_id).split(".")
    if path[0] not in table.schema.names:
        raise ValidationError(f"partition source column {'.'.join(path)!r} is not in the data")
    arr = _plain(table.column(path[0]))
    for depth, name in enumerate(path[1:], start=1):
        if not pa.types.is_struct(arr.type) or arr.type.get_field_index(name) < 0:
            raise ValidationError(
                f"partition source column {'.'.join(path)!r}: {'.'.join(path[:depth])!r} "
                f"has no struct field {name!r}"
            )
        children = dict(
            zip(
                [arr.type.field(j).name for j in range(arr.type.num_fields)],
                arr.flatten(),
                strict=True,
            )
        )
        arr = children[name]  # flatten() folds the parent's nulls into the child
    return arr


def _plain(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


# --- building specs the way Java's PartitionSpec.Builder does ---------------

SpecTuple: TypeAlias = tuple[str, str] | tuple[str, str, Any] | tuple[str, str, Any, str]
_SUFFIX = {"year": "_year", "month": "_month", "day": "_day", "hour": "_hour", "void": "_null"}


def build_partition_spec(
    schema: Schema,
    spec_like: PartitionSpec | Iterable[SpecTuple] | None,
    spec_id: int = 0,
    start_field_id: int = PARTITION_DATA_ID_START,
) -> PartitionSpec:
    """A spec bound to ``schema`` from tuples such as ``("day", "ts")``, ``("bucket", "id", 16)``.

    A tuple is ``(transform, column)``, ``(transform, column, name)`` or, for
    bucket and truncate, ``(transform, column, n)`` / ``(transform, column, n, name)``.
    Default names are Java's: identity keeps the column name, bucket adds
    ``_bucket``, truncate ``_trunc``, year/month/day/hour their own name, void ``_null``.
    An existing PartitionSpec is checked against ``schema`` and returned bound.
    """
    if spec_like is None:
        return replace(UNPARTITIONED_SPEC, spec_id=spec_id, schema=schema)
    if isinstance(spec_like, PartitionSpec):
        return spec_like.bind(schema)
    builder = _Builder(schema, start_field_id)
    for item in spec_like:
        builder.add(item)
    return PartitionSpec(spec_id, tuple(builder.fields), schema)


class _Builder:
    def __init__(self, schema: Schema, start_field_id: int) -> None:
        self.schema = schema
        self.next_id = start_field_id
        self.fields: list[PartitionField] = []
        self.names: set[str] = set()
        self.dedup: dict[tuple[int, str], PartitionField] = {}
        self.partitionable = set(schema.primitive_field_ids_outside_collections())

    def add(self, item: SpecTuple) -> None:
        if not isinstance(item, (tuple, list)) or len(item) < 2:
            raise InvalidTransformError(
                f"partition spec entry must be (transform, column, ...), got {item!r}"
            )
        kind, column, *rest = item
        transform, name = self._transform(str(kind), rest, item)
        source = self._source(column)
        col_name = self.schema.find_column_name(source.field_id)
        if not transform.can_transform(source.field_type):
            raise InvalidTransformError(
                f"cannot partition column {col_name!r} of type {source.field_type} by {transform}"
            )
        if name is None:
            name = col_name if isinstance(transform, Identity) else col_name + _suffix(transform)
        self._check_name(name, transform, source)
        f = PartitionField(source.field_id, self.next_id, transform, name)
        self.next_id += 1
        if not isinstance(transform, (Bucket, Truncate, Void)):
            key = (f.source_id, transform.dedup_name)
            if key in self.dedup:
                raise ValidationError(f"redundant partition: {f} conflicts with {self.dedup[key]}")
            self.dedup[key] = f
        self.fields.append(f)

    def _transform(self, kind: str, rest: list[Any], item: Any) -> tuple[Transform, str | None]:
        kind = kind.strip().lower()
        if kind in ("bucket", "truncate"):
            if not rest or not isinstance(rest[0], int) or isinstance(rest[0], bool):
                raise InvalidTransformError(f"{kind} needs an integer argument: {item!r}")
            transform: Transform = Bucket(rest[0]) if kind == "bucket" else Truncate(rest[0])
            rest = rest[1:]
        else:
            transform = parse_transform(kind)
        if len(rest) > 1 or (rest and not isinstance(rest[0], str)):
            raise InvalidTransformError(f"unexpected arguments in partition spec entry {item!r}")
        return transform, (rest[0] if rest else None)

    def _source(self, column: Any) -> NestedField:
        if not isinstance(column, str) or not self.schema.has_field(column):
            raise ValidationError(
                f"unknown partition source column {column!r}; schema has {self.schema.column_names}"
            )
        source = self.schema.find_field(column)
        if source.field_id not in self.partitionable:
            raise InvalidTransformError(
                f"cannot partition by column {column!r}: not a primitive outside lists and maps"
            )
        return source

    def _check_name(self, name: str, transform: Transform, source: NestedField) -> None:
        if not name:
            raise ValidationError(f"empty partition name for column {source.name!r}")
        if self.schema.has_field(name):
            same_source = self.schema.find_field(name).field_id == source.field_id
            if not (isinstance(transform, (Identity, Void)) and same_source):
                raise ValidationError(
                    f"partition name {name!r} is a schema column other than the identity source"
                )
        if name in self.names:
            raise ValidationError(f"partition name {name!r} is used more than once")
        self.names.add(name)


def _suffix(transform: Transform) -> str:
    if isinstance(transform, Bucket):
        return "_bucket"
    if isinstance(transform, Truncate):
        return "_trunc"
    return _SUFFIX[str(transform)]


# --- Java's URLEncoder.encode(s, UTF_8) -----------------------------------

_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")


def java_url_encode(text: str) -> str:
    """``application/x-www-form-urlencoded`` as Java writes it: space is ``+``, ``~`` is escaped."""
    out = []
    for byte in text.encode("utf-8", errors="replace"):
        if byte in _URL_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)
