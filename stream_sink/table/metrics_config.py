"""Which column metrics a writer collects, from table properties (Java's MetricsConfig).

Properties:
- ``write.metadata.metrics.default``: the mode of every column not set explicitly
  (default ``truncate(16)``).
- ``write.metadata.metrics.column.<dotted name>``: the mode of one column.
- ``write.metadata.metrics.max-inferred-column-defaults`` (default 100): when no
  default is configured and the schema has more primitive columns than this, only
  the first ones (breadth first, as Java orders them) get ``truncate(16)``, the rest
  ``none``.

Invariants:
- A mode string that cannot be parsed raises InvalidOptionError naming the property
  (Java logs and ignores it; a silent fallback would hide a typo).
- Columns named in properties but absent from the schema are ignored here (the schema
  may have evolved); :func:`validate_properties` reports them.
- Columns of a sort order keep bounds: ``none``/``counts`` become ``truncate(16)``
  for them unless set explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from stream_sink.exceptions import InvalidOptionError
from stream_sink.table.schema import Schema
from stream_sink.table.types import IcebergType, ListType, MapType, PrimitiveType, StructType

DEFAULT_MODE_PROPERTY = "write.metadata.metrics.default"
COLUMN_MODE_PREFIX = "write.metadata.metrics.column."
MAX_INFERRED_PROPERTY = "write.metadata.metrics.max-inferred-column-defaults"
DEFAULT_MODE_STRING = "truncate(16)"
MAX_INFERRED_DEFAULT = 100

# Reserved ids of a position delete file's columns (spec: "Position Delete Files").
DELETE_FILE_PATH_ID = 2147483546
DELETE_FILE_POS_ID = 2147483545

_TRUNCATE = re.compile(r"^truncate\((\d+)\)$")


@dataclass(frozen=True)
class MetricsMode:
    """``kind`` is one of none, counts, truncate, full; ``length`` only for truncate."""

    kind: str
    length: int | None = None

    @property
    def has_counts(self) -> bool:
        return self.kind != "none"

    @property
    def has_bounds(self) -> bool:
        return self.kind in ("truncate", "full")

    def __str__(self) -> str:
        return f"truncate({self.length})" if self.kind == "truncate" else self.kind

    @staticmethod
    def parse(text: str, where: str) -> MetricsMode:
        """Parse ``none``, ``counts``, ``full`` or ``truncate(N)`` (any case, N > 0)."""
        s = text.strip().lower()
        if s in ("none", "counts", "full"):
            return MetricsMode(s)
        m = _TRUNCATE.match(s)
        if m and int(m.group(1)) > 0:
            return MetricsMode("truncate", int(m.group(1)))
        raise InvalidOptionError(
            f"invalid metrics mode {text!r} for {where}: expected none, counts, full "
            f"or truncate(N) with N > 0"
        )


NONE = MetricsMode("none")
COUNTS = MetricsMode("counts")
FULL = MetricsMode("full")
DEFAULT_MODE = MetricsMode("truncate", 16)


@dataclass(frozen=True)
class MetricsConfig:
    """Per-column metrics modes; ``mode_for`` answers for any field id."""

    default_mode: MetricsMode = DEFAULT_MODE
    column_modes: Mapping[int, MetricsMode] = field(default_factory=dict)

    def mode_for(self, field_id: int) -> MetricsMode:
        return self.column_modes.get(field_id, self.default_mode)

    @staticmethod
    def from_properties(
        props: Mapping[str, str], schema: Schema, sort_columns: Iterable[str] = ()
    ) -> MetricsConfig:
        modes: dict[int, MetricsMode] = {}
        configured = props.get(DEFAULT_MODE_PROPERTY)
        if configured is not None:
            default = MetricsMode.parse(configured, DEFAULT_MODE_PROPERTY)
        else:
            limit = _max_inferred(props)
            if len(list(_primitive_ids(schema))) <= limit:
                default = DEFAULT_MODE
            else:
                default = NONE
                modes.update((fid, DEFAULT_MODE) for fid in limited_field_ids(schema, limit))
        sorted_mode = DEFAULT_MODE if default in (NONE, COUNTS) else default
        for name in sort_columns:
            if schema.has_field(name):
                modes[schema.find_field(name).field_id] = sorted_mode
        for key, value in props.items():
            if key.startswith(COLUMN_MODE_PREFIX):
                mode = MetricsMode.parse(value, key)
                column = key[len(COLUMN_MODE_PREFIX) :]
                if schema.has_field(column):
                    modes[schema.find_field(column).field_id] = mode
        return MetricsConfig(default, modes)

    @staticmethod
    def for_position_deletes() -> MetricsConfig:
        """Java's position delete config: bounds on file_path and pos only."""
        return MetricsConfig(NONE, {DELETE_FILE_PATH_ID: FULL, DELETE_FILE_POS_ID: FULL})


def validate_properties(props: Mapping[str, str], schema: Schema) -> None:
    """Raise InvalidOptionError for a bad mode or a column the schema does not have."""
    MetricsConfig.from_properties(props, schema)
    _max_inferred(props)
    for key in props:
        if key.startswith(COLUMN_MODE_PREFIX):
            column = key[len(COLUMN_MODE_PREFIX) :]
            if not schema.has_field(column):
                raise InvalidOptionError(
                    f"table property {key}: no column {column!r} in schema {schema.column_names}"
                )


def _max_inferred(props: Mapping[str, str]) -> int:
    raw = props.get(MAX_INFERRED_PROPERTY)
    if raw is None:
        return MAX_INFERRED_DEFAULT
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidOptionError(
            f"table property {MAX_INFERRED_PROPERTY} must be an integer, got {raw!r}"
        ) from None
    return MAX_INFERRED_DEFAULT if value < 0 else value


def _primitive_ids(schema: Schema) -> Iterator[int]:
    """Ids of every primitive field, list element and map key/value."""
    for f in schema.leaf_fields():
        yield f.field_id


def limited_field_ids(schema: Schema, limit: int) -> list[int]:
    """The first ``limit`` primitive ids: each struct's own primitives before its children's."""
    out: list[int] = []

    def visit(t: IcebergType) -> None:
        if isinstance(t, StructType):
            for f in t.fields:
                if len(out) < limit and isinstance(f.field_type, PrimitiveType):
                    out.append(f.field_id)
            for f in t.fields:
                if len(out) >= limit:
                    return
                visit(f.field_type)
        elif isinstance(t, ListType):
            if len(out) < limit and isinstance(t.element_type, PrimitiveType):
                out.append(t.element_id)
            visit(t.element_type)
        elif isinstance(t, MapType):
            if len(out) < limit and isinstance(t.key_type, PrimitiveType):
                out.append(t.key_id)
            if len(out) < limit and isinstance(t.value_type, PrimitiveType):
                out.append(t.value_id)
            visit(t.key_type)
            visit(t.value_type)

    visit(schema.as_struct())
    return out
