"""Name mapping (spec: "Column Projection", "Name Mapping Serialization").

A table property ``schema.name-mapping.default`` holds a JSON list of field mappings,
each ``{"names": [...], "field-id": N, "fields": [...]}``. Readers use it only for data
files written without Parquet field ids (files added with pyiceberg's ``add_files``,
migrated or imported Hive tables): a file column takes the field id of the mapping
entry listing its name at the same nesting level.

Invariants:
- A name is a literal name, never a dotted path: ``"a.b"`` maps a column called
  ``a.b``, not child ``b`` of ``a``.
- A file column whose name the mapping does not list (or lists without a field id)
  has no field id: it is not read, and the table column it might have been reads as
  its default or null, as every other reader does.
- The mapping is used for files without field ids only; ids in a file always win.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stream_sink.exceptions import CorruptMetadataError
from stream_sink.table.schema import Schema
from stream_sink.table.types import NestedField, child_fields

NAME_MAPPING_PROPERTY = "schema.name-mapping.default"


@dataclass(frozen=True)
class MappedField:
    """One field mapping: the names a file may use for field ``field_id``."""

    names: tuple[str, ...]
    field_id: int | None = None
    fields: tuple[MappedField, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"names": list(self.names)}
        if self.field_id is not None:
            out["field-id"] = self.field_id
        if self.fields:
            out["fields"] = [f.to_json() for f in self.fields]
        return out


def find(fields: Iterable[MappedField], name: str) -> MappedField | None:
    """The mapping entry at one nesting level that lists ``name``."""
    for f in fields:
        if name in f.names:
            return f
    return None


@dataclass(frozen=True)
class NameMapping:
    """The top-level field mappings of a table."""

    fields: tuple[MappedField, ...]

    def to_json(self) -> str:
        return json.dumps([f.to_json() for f in self.fields], separators=(",", ":"))


def parse_name_mapping(text: str, where: str) -> NameMapping:
    """The mapping in ``text``; malformed JSON raises CorruptMetadataError naming ``where``."""
    try:
        obj = json.loads(text)
        if not isinstance(obj, list):
            raise TypeError("not a JSON list")
        return NameMapping(tuple(_field_from_json(f) for f in obj))
    except (json.JSONDecodeError, TypeError, ValueError, KeyError) as e:
        raise CorruptMetadataError(
            f"{where}: property {NAME_MAPPING_PROPERTY} is not a valid name mapping ({e}); "
            "readers use it to identify the columns of files written without field ids"
        ) from e


def table_name_mapping(properties: dict[str, str] | Any, where: str) -> NameMapping | None:
    """The table's name mapping, or None when it has none."""
    text = properties.get(NAME_MAPPING_PROPERTY)
    return None if text is None else parse_name_mapping(text, where)


def _field_from_json(obj: Any) -> MappedField:
    if not isinstance(obj, dict):
        raise TypeError(f"field mapping {obj!r} is not an object")
    names = obj.get("names") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"names of {obj!r} is not a list of strings")
    fid = obj.get("field-id")
    children = obj.get("fields") or []
    if not isinstance(children, list):
        raise TypeError(f"fields of {obj!r} is not a list")
    return MappedField(
        tuple(names),
        None if fid is None else int(fid),
        tuple(_field_from_json(c) for c in children),
    )


def mapping_of(schema: Schema) -> NameMapping:
    """The mapping that names every field of ``schema`` by its current name (what Java's
    ``MappingUtil.create`` and pyiceberg's ``add_files`` write)."""
    return NameMapping(tuple(_mapped(f) for f in schema.fields))


def _mapped(f: NestedField) -> MappedField:
    return MappedField((f.name,), f.field_id, tuple(_mapped(c) for c in child_fields(f.field_type)))


def updated_mapping(mapping: NameMapping, old: Schema, new: Schema) -> NameMapping:
    """``mapping`` after a schema change from ``old`` to ``new`` (as Java's schema update
    does): a renamed field keeps its old names and gains the new one; added fields get
    entries under their names. Names of other fields are never taken away, so files
    written under them still read."""
    return NameMapping(_update(mapping.fields, new.fields, old))


def _update(
    entries: tuple[MappedField, ...], fields: tuple[NestedField, ...], old: Schema
) -> tuple[MappedField, ...]:
    by_id = {e.field_id: e for e in entries if e.field_id is not None}
    out = list(entries)
    for f in fields:
        entry = by_id.get(f.field_id)
        children = child_fields(f.field_type)
        if entry is None:
            if not old.has_field(f.field_id):
                out.append(_mapped(f))
            continue
        names = entry.names if f.name in entry.names else (*entry.names, f.name)
        sub = _update(entry.fields, children, old) if children else entry.fields
        out[out.index(entry)] = MappedField(names, entry.field_id, sub)
    return tuple(_dedupe(out))


def _dedupe(entries: list[MappedField]) -> Iterable[MappedField]:
    """A name listed by two entries maps to the newest one (a column added under the
    name of a dropped one); older entries lose that name."""
    taken: set[str] = set()
    kept: list[MappedField] = []
    for e in reversed(entries):
        names = tuple(n for n in e.names if n not in taken)
        taken.update(names)
        kept.append(MappedField(names, e.field_id, e.fields))
    return reversed(kept)
