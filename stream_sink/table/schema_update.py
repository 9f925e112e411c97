"""Schema evolution (spec: "Schema Evolution"), in pyiceberg's shape::

    with table.update_schema() as u:
        u.add_column("note", "string")
        u.union_by_name(arrow_schema)

Invariants:
- A change produces a new schema with a new schema id (an identical earlier schema is
  reused, as Java does); existing field ids never change and new fields get ids above
  the table's ``last-column-id``, so an id is never reused.
- Allowed without ``allow_incompatible_changes``: add an optional column (top level
  or inside a struct), widen a type (int→long, float→double, decimal precision),
  make a required column optional, rename, reorder. Anything else raises
  IncompatibleSchemaChangeError naming the column, the old and new type and what
  would allow it; a few changes (string→int, narrowing) are never allowed.
- Each call is checked at once against the schema the update started from; the
  commit re-applies every call to the table's current schema after each refresh
  (optimistic retry) and commits only when the table's current schema id is still
  the one it was applied to (the catalog's compare-and-swap). A change that leaves
  the schema as it is commits nothing.
- Identifier fields stay required primitives: making one optional is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from stream_sink.exceptions import IncompatibleSchemaChangeError, ValidationError
from stream_sink.table.defaults import default_to_json
from stream_sink.table.name_mapping import (
    NAME_MAPPING_PROPERTY,
    table_name_mapping,
    updated_mapping,
)
from stream_sink.table.promotion import is_safe_promotion
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
    primitive_from_string,
)

if TYPE_CHECKING:
    from stream_sink.table.metadata import TableMetadata
    from stream_sink.table.table import Table

Path: TypeAlias = tuple[str, ...]
ColumnPath: TypeAlias = str | Sequence[str]
TypeLike: TypeAlias = IcebergType | str | pa.DataType
ALLOW_OPTION = "allow_incompatible_changes=True"


def to_path(column: ColumnPath) -> Path:
    """``"a.b"`` or ``("a", "b")`` → ``("a", "b")`` (the tuple form allows dots in names)."""
    path = tuple(column.split(".")) if isinstance(column, str) else tuple(column)
    if not path or any(not isinstance(p, str) or not p for p in path):
        raise ValidationError(f"invalid column path {column!r}")
    return path


def _name(path: Path) -> str:
    return ".".join(path)


@dataclass
class _Build:
    """The schema being built: top-level fields, identifier ids, the highest id used."""

    fields: tuple[NestedField, ...]
    identifier_ids: tuple[int, ...]
    last_column_id: int
    allow_incompatible: bool
    format_version: int = 2

    def next_id(self) -> int:
        self.last_column_id += 1
        return self.last_column_id

    def schema(self, schema_id: int) -> Schema:
        return Schema(*self.fields, schema_id=schema_id, identifier_field_ids=self.identifier_ids)


Change = Callable[[_Build], None]


class UpdateSchema:
    """Collects schema changes of ``table`` and commits them as one metadata change.

    Use as a context manager (commits on a clean exit) or call :meth:`commit`.
    Paths are dotted names (``"address.zip"``) or tuples; ``element``, ``key`` and
    ``value`` step into lists and maps.
    """

    def __init__(
        self,
        table: Table,
        *,
        allow_incompatible_changes: bool = False,
        make_optional_from_data: bool = True,
    ) -> None:
        self._table = table
        self._allow = allow_incompatible_changes
        self._optional_from_data = make_optional_from_data
        self._changes: list[Change] = []
        meta = table.metadata
        self._preview = self._start(meta)

    def _start(self, meta: TableMetadata) -> _Build:
        s = meta.schema
        return _Build(
            s.fields, s.identifier_field_ids, meta.last_column_id, self._allow, meta.format_version
        )

    def _record(self, change: Change) -> UpdateSchema:
        change(self._preview)  # raises now, before anything is recorded
        self._changes.append(change)
        return self

    # --- the changes ---------------------------------------------------------------------

    def add_column(
        self,
        path: ColumnPath,
        field_type: TypeLike,
        doc: str | None = None,
        required: bool = False,
        default: Any = None,
    ) -> UpdateSchema:
        """Add a column (optional unless ``required``, which needs allow_incompatible_changes).

        ``default`` (format version 3 tables): the column's ``initial-default`` (what
        rows written before read as) and ``write-default`` (what writes that lack the
        column store); a required column with a default needs no incompatible change."""
        p, t = to_path(path), _as_type(field_type, _name(to_path(path)))
        return self._record(lambda b: _add(b, p, t, doc, required, default))

    def rename_column(self, path: ColumnPath, new_name: str) -> UpdateSchema:
        p = to_path(path)
        if not new_name or "." in new_name:
            raise ValidationError(f"cannot rename {_name(p)!r} to {new_name!r}: not a plain name")
        return self._record(lambda b: _rename(b, p, new_name))

    def update_column(
        self,
        path: ColumnPath,
        field_type: TypeLike | None = None,
        required: bool | None = None,
        doc: str | None = None,
    ) -> UpdateSchema:
        """Widen the type, change nullability or the doc of a column."""
        p = to_path(path)
        t = None if field_type is None else _as_type(field_type, _name(p))
        return self._record(lambda b: _update(b, p, t, required, doc))

    def make_column_optional(self, path: ColumnPath) -> UpdateSchema:
        return self.update_column(path, required=False)

    def move_first(self, path: ColumnPath) -> UpdateSchema:
        p = to_path(path)
        return self._record(lambda b: _move(b, p, None, "first"))

    def move_before(self, path: ColumnPath, before: ColumnPath) -> UpdateSchema:
        p, other = to_path(path), to_path(before)
        return self._record(lambda b: _move(b, p, other, "before"))

    def move_after(self, path: ColumnPath, after: ColumnPath) -> UpdateSchema:
        p, other = to_path(path), to_path(after)
        return self._record(lambda b: _move(b, p, other, "after"))

    def set_identifier_fields(self, *names: str) -> UpdateSchema:
        paths = [to_path(n) for n in names]
        return self._record(lambda b: _set_identifiers(b, paths))

    def union_by_name(
        self, new_schema: Schema | pa.Schema, *, promote_types: bool = True
    ) -> UpdateSchema:
        """Add every column of ``new_schema`` the table lacks (as optional), widen types
        it widens (unless ``promote_types=False``: then a wider type is refused), and
        make optional the required columns it has as optional (unless
        ``make_optional_from_data=False``). Columns only the table has stay; a column the
        data has narrower (int data, long column) stays as it is."""
        other = _as_schema(new_schema)
        how = _Union(self._optional_from_data, promote_types)
        return self._record(lambda b: _union(b, (), other.fields, how))

    # --- results -------------------------------------------------------------------------

    def apply(self) -> Schema:
        """The schema the changes give on the schema the update started from."""
        return self._preview.schema(self._table.metadata.current_schema_id)

    def commit(self) -> Schema:
        """Commit the changes (a metadata-only commit, retried per ``commit.retry.*``);
        returns the table's schema afterwards."""
        from stream_sink.table.metadata_commit import commit_metadata_change

        committed = commit_metadata_change(self._table, self._changed_metadata)
        return committed.schema

    def _changed_metadata(self, base: TableMetadata) -> TableMetadata | None:
        build = self._start(base)
        for change in self._changes:
            change(build)
        schema = build.schema(base.current_schema_id)
        if schema.same_structure(base.schema):
            return None
        out = base.with_schema(schema)
        out = replace(out, last_column_id=max(out.last_column_id, build.last_column_id))
        return _with_updated_mapping(out, base)

    def __enter__(self) -> UpdateSchema:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.commit()


def _with_updated_mapping(out: TableMetadata, base: TableMetadata) -> TableMetadata:
    """``out`` with the table's name mapping (if it has one) following the schema
    change, as Java's schema update does: files without field ids keep reading under
    their old names, and columns added now are mapped under theirs."""
    mapping = table_name_mapping(base.properties, f"table {base.location}")
    if mapping is None:
        return out
    updated = updated_mapping(mapping, base.schema, out.schema)
    if updated == mapping:
        return out
    return out.with_properties({NAME_MAPPING_PROPERTY: updated.to_json()})


# --- conversions -----------------------------------------------------------------------------


def _as_type(t: TypeLike, where: str) -> IcebergType:
    if isinstance(t, IcebergType):
        return t
    if isinstance(t, str):
        return primitive_from_string(t)
    if isinstance(t, pa.DataType):
        from stream_sink.table.arrow import schema_from_arrow

        return schema_from_arrow(pa.schema([pa.field(where, t)])).fields[0].field_type
    raise ValidationError(f"column {where!r}: {t!r} is not a type")


def _as_schema(s: Schema | pa.Schema) -> Schema:
    if isinstance(s, Schema):
        return s
    from stream_sink.table.arrow import schema_from_arrow

    return schema_from_arrow(pa.schema([pa.field(f.name, f.type, f.nullable) for f in s]))


def _fresh_ids(t: IcebergType, b: _Build) -> IcebergType:
    """``t`` with every nested field given a new id (the spec: ids are assigned by the table)."""
    if isinstance(t, StructType):
        ids = [b.next_id() for _ in t.fields]
        return StructType(
            *(
                replace(f, field_id=i, field_type=_fresh_ids(f.field_type, b))
                for f, i in zip(t.fields, ids, strict=True)
            )
        )
    if isinstance(t, ListType):
        return ListType(b.next_id(), _fresh_ids(t.element_type, b), t.element_required)
    if isinstance(t, MapType):
        kid, vid = b.next_id(), b.next_id()
        return MapType(
            kid, _fresh_ids(t.key_type, b), vid, _fresh_ids(t.value_type, b), t.value_required
        )
    return t


# --- walking the field tree -----------------------------------------------------------------


def _children(t: IcebergType) -> tuple[NestedField, ...] | None:
    if isinstance(t, StructType):
        return t.fields
    if isinstance(t, ListType):
        return (t.element_field,)
    if isinstance(t, MapType):
        return (t.key_field, t.value_field)
    return None


def _with_children(t: IcebergType, children: tuple[NestedField, ...]) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(*children)
    if isinstance(t, ListType):
        (e,) = children
        return ListType(e.field_id, e.field_type, e.required)
    if isinstance(t, MapType):
        k, v = children
        return MapType(k.field_id, k.field_type, v.field_id, v.field_type, v.required)
    raise ValidationError(f"type {t} has no children")


def _find(fields: tuple[NestedField, ...], path: Path) -> NestedField:
    current: tuple[NestedField, ...] | None = fields
    found: NestedField | None = None
    for i, part in enumerate(path):
        found = next((f for f in current or () if f.name == part), None)
        if found is None:
            raise ValidationError(
                f"cannot change column {_name(path)!r}: {_name(path[: i + 1])!r} does not exist"
            )
        current = _children(found.field_type)
    assert found is not None
    return found


def _edit_siblings(
    fields: tuple[NestedField, ...],
    parent: Path,
    edit: Callable[[tuple[NestedField, ...]], tuple[NestedField, ...]],
) -> tuple[NestedField, ...]:
    """``fields`` with the children of the struct (list, map) at ``parent`` replaced."""
    if not parent:
        return edit(fields)
    head, rest = parent[0], parent[1:]
    out = []
    for f in fields:
        if f.name == head:
            kids = _children(f.field_type)
            if kids is None:
                raise ValidationError(f"column {head!r} is a {f.field_type}, not a struct")
            f = replace(
                f, field_type=_with_children(f.field_type, _edit_siblings(kids, rest, edit))
            )
        out.append(f)
    return tuple(out)


def _edit_field(b: _Build, path: Path, edit: Callable[[NestedField], NestedField]) -> None:
    _find(b.fields, path)

    def one(siblings: tuple[NestedField, ...]) -> tuple[NestedField, ...]:
        return tuple(edit(f) if f.name == path[-1] else f for f in siblings)

    b.fields = _edit_siblings(b.fields, path[:-1], one)


# --- the changes ----------------------------------------------------------------------------


def _add(
    b: _Build, path: Path, t: IcebergType, doc: str | None, required: bool, default: Any = None
) -> None:
    parent = path[:-1]
    if parent:
        ptype = _find(b.fields, parent).field_type
        if not isinstance(ptype, StructType):
            raise ValidationError(
                f"cannot add {_name(path)!r}: {_name(parent)!r} is a {ptype}, not a struct"
            )
    siblings = _children(_find(b.fields, parent).field_type) if parent else b.fields
    if any(f.name == path[-1] for f in siblings or ()):
        raise ValidationError(f"cannot add column {_name(path)!r}: it already exists")
    text = None
    if default is not None:
        if b.format_version < 3:
            raise ValidationError(
                f"cannot add column {_name(path)!r} with a default: column defaults need a "
                f"format version 3 table (this one is v{b.format_version}; "
                "upgrade_format_version(3))"
            )
        text = default_to_json(t, default, _name(path))
    if required and text is None and not b.allow_incompatible:
        raise IncompatibleSchemaChangeError(
            f"cannot add required column {_name(path)!r} ({t}): rows written before have no "
            f"value for it; add it as optional, give it a default (v3), or pass {ALLOW_OPTION}"
        )
    new = NestedField(b.next_id(), path[-1], _fresh_ids(t, b), required, doc, text, text)
    b.fields = _edit_siblings(b.fields, parent, lambda fs: (*fs, new))


def _rename(b: _Build, path: Path, new_name: str) -> None:
    siblings = _children(_find(b.fields, path[:-1]).field_type) if path[:-1] else b.fields
    if any(f.name == new_name for f in siblings or ()) and new_name != path[-1]:
        raise ValidationError(f"cannot rename {_name(path)!r} to {new_name!r}: that name exists")
    _edit_field(b, path, lambda f: replace(f, name=new_name))


def _update(
    b: _Build, path: Path, t: IcebergType | None, required: bool | None, doc: str | None
) -> None:
    current = _find(b.fields, path)
    if t is not None and t != current.field_type:
        check_promotion(_name(path), current.field_type, t, b.allow_incompatible)
    if required is True and current.optional and not b.allow_incompatible:
        raise IncompatibleSchemaChangeError(
            f"cannot make column {_name(path)!r} required: it may hold nulls; pass {ALLOW_OPTION}"
        )
    if required is False and current.field_id in b.identifier_ids:
        raise IncompatibleSchemaChangeError(
            f"cannot make column {_name(path)!r} optional: it is an identifier field "
            "(primary key); change the identifier fields first"
        )

    def edit(f: NestedField) -> NestedField:
        return replace(
            f,
            field_type=t if t is not None else f.field_type,
            required=f.required if required is None else required,
            doc=f.doc if doc is None else doc,
        )

    _edit_field(b, path, edit)


def check_promotion(column: str, old: IcebergType, new: IcebergType, allow: bool = False) -> None:
    """Raise IncompatibleSchemaChangeError unless ``old`` may become ``new``."""
    if not isinstance(old, PrimitiveType) or not isinstance(new, PrimitiveType):
        raise IncompatibleSchemaChangeError(
            f"cannot change column {column!r} from {old} to {new}: only primitive types "
            "can be promoted; nested types change through their fields"
        )
    if not is_safe_promotion(old, new):
        raise IncompatibleSchemaChangeError(
            f"cannot change column {column!r} from {old} to {new}: Iceberg only widens "
            "int to long, float to double and decimal(P, S) to decimal(P', S) with P' >= P; "
            "write the data as a new column instead"
        )


def _move(b: _Build, path: Path, other: Path | None, where: str) -> None:
    _find(b.fields, path)
    if other is not None:
        _find(b.fields, other)
        if other[:-1] != path[:-1]:
            raise ValidationError(
                f"cannot move {_name(path)!r} {where} {_name(other)!r}: "
                "they are in different structs"
            )
        if other == path:
            raise ValidationError(f"cannot move {_name(path)!r} {where} itself")

    def edit(siblings: tuple[NestedField, ...]) -> tuple[NestedField, ...]:
        moving = next(f for f in siblings if f.name == path[-1])
        rest = [f for f in siblings if f.name != path[-1]]
        if other is None:
            return (moving, *rest)
        i = next(i for i, f in enumerate(rest) if f.name == other[-1])
        i = i if where == "before" else i + 1
        return (*rest[:i], moving, *rest[i:])

    b.fields = _edit_siblings(b.fields, path[:-1], edit)


def _set_identifiers(b: _Build, paths: list[Path]) -> None:
    b.identifier_ids = tuple(_find(b.fields, p).field_id for p in paths)
    Schema(*b.fields, identifier_field_ids=b.identifier_ids)  # validates the new key


@dataclass(frozen=True)
class _Union:
    relax: bool
    promote: bool


def _union(b: _Build, parent: Path, new_fields: tuple[NestedField, ...], how: _Union) -> None:
    siblings = _children(_find(b.fields, parent).field_type) if parent else b.fields
    by_name = {f.name: f for f in siblings or ()}
    for nf in new_fields:
        path = (*parent, nf.name)
        cur = by_name.get(nf.name)
        if cur is None:
            _add(b, path, nf.field_type, nf.doc, False)
            continue
        _union_field(b, path, cur, nf, how)


def _union_field(b: _Build, path: Path, cur: NestedField, nf: NestedField, how: _Union) -> None:
    ct, nt = cur.field_type, nf.field_type
    if isinstance(ct, StructType) and isinstance(nt, StructType):
        _union(b, path, nt.fields, how)
    elif isinstance(ct, ListType) and isinstance(nt, ListType):
        _union_field(b, (*path, "element"), ct.element_field, nt.element_field, how)
    elif isinstance(ct, MapType) and isinstance(nt, MapType):
        _union_field(b, (*path, "key"), ct.key_field, nt.key_field, how)
        _union_field(b, (*path, "value"), ct.value_field, nt.value_field, how)
    elif ct != nt:
        if isinstance(ct, PrimitiveType) and isinstance(nt, PrimitiveType):
            if is_safe_promotion(nt, ct):
                pass  # narrower data into a wider column: written as is
            else:
                check_promotion(_name(path), ct, nt, b.allow_incompatible)
                if not how.promote:
                    raise IncompatibleSchemaChangeError(
                        f"column {_name(path)!r} is {ct} in the table and {nt} in the data: "
                        "widening it was not allowed"
                    )
                _update(b, path, nt, None, None)
        else:
            raise IncompatibleSchemaChangeError(
                f"cannot change column {_name(path)!r} from {ct} to {nt}"
            )
    if how.relax and cur.required and nf.optional and cur.field_id not in b.identifier_ids:
        _update(b, path, None, False, None)
