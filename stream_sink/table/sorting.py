"""Sort orders (spec: "Sorting"; JSON per Appendix C).

Invariants:
- Order id 0 is the unsorted order and has no fields; any other order has at
  least one field.
- A sort field is (source column id, transform, direction, null order); the
  default null order is Java's: nulls first when ascending, last when descending.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from stream_sink.exceptions import CorruptMetadataError, InvalidTransformError, ValidationError
from stream_sink.table.schema import Schema
from stream_sink.table.transforms import Identity, Transform, parse_transform


class SortDirection(enum.Enum):
    ASC = "asc"
    DESC = "desc"

    def __str__(self) -> str:
        return self.value


class NullOrder(enum.Enum):
    NULLS_FIRST = "nulls-first"
    NULLS_LAST = "nulls-last"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SortField:
    source_id: int
    transform: Transform
    direction: SortDirection = SortDirection.ASC
    null_order: NullOrder = NullOrder.NULLS_FIRST

    def to_json(self) -> dict[str, Any]:
        return {
            "transform": str(self.transform),
            "source-id": self.source_id,
            "direction": self.direction.value,
            "null-order": self.null_order.value,
        }

    @staticmethod
    def from_json(obj: Any) -> SortField:
        if not isinstance(obj, dict):
            raise CorruptMetadataError(f"sort field is not an object: {obj!r:.200}")
        try:
            source_id = obj["source-id"] if "source-id" in obj else _single(obj["source-ids"])
            return SortField(
                source_id=int(source_id),
                transform=parse_transform(obj["transform"]),
                direction=SortDirection(obj["direction"]),
                null_order=NullOrder(obj["null-order"]),
            )
        except KeyError as e:
            raise CorruptMetadataError(f"sort field {obj!r:.200} lacks {e}") from e
        except (ValueError, TypeError, InvalidTransformError) as e:
            raise CorruptMetadataError(f"sort field {obj!r:.200} is malformed: {e}") from e

    def satisfies(self, other: SortField) -> bool:
        """Whether data sorted by this field is also sorted by ``other``."""
        return (
            self.source_id == other.source_id
            and self.direction == other.direction
            and self.null_order == other.null_order
            and self.transform.satisfies_order_of(other.transform)
        )

    def __str__(self) -> str:
        return f"{self.transform}({self.source_id}) {self.direction} {self.null_order}"


@dataclass(frozen=True)
class SortOrder:
    order_id: int
    fields: tuple[SortField, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        if self.order_id == 0 and self.fields:
            raise ValidationError("sort order id 0 is reserved for the unsorted order")
        if self.order_id != 0 and not self.fields:
            raise ValidationError(f"sort order {self.order_id} has no fields")

    @property
    def is_unsorted(self) -> bool:
        return not self.fields

    def satisfies(self, other: SortOrder) -> bool:
        """Whether data in this order is also in ``other`` (``other`` is a prefix of this)."""
        if len(other.fields) > len(self.fields):
            return False
        return all(a.satisfies(b) for a, b in zip(self.fields, other.fields, strict=False))

    def check(self, schema: Schema) -> None:
        """Raise when a field's source is missing from ``schema`` or its transform cannot apply."""
        for f in self.fields:
            if not schema.has_field(f.source_id):
                raise ValidationError(
                    f"sort field {f}: source id {f.source_id} is not in the schema"
                )
            source = schema.find_type(f.source_id)
            if not f.transform.can_transform(source):
                name = schema.find_column_name(f.source_id)
                raise InvalidTransformError(
                    f"sort field {f.transform} on column {name!r} of type {source} is not possible"
                )

    def to_json(self) -> dict[str, Any]:
        return {"order-id": self.order_id, "fields": [f.to_json() for f in self.fields]}

    @staticmethod
    def from_json(obj: Any) -> SortOrder:
        if not isinstance(obj, dict) or not isinstance(obj.get("fields"), list):
            raise CorruptMetadataError(f"sort order is not an object with fields: {obj!r:.200}")
        order_id = obj.get("order-id")
        if not isinstance(order_id, int):
            raise CorruptMetadataError(f"sort order id is not an int: {order_id!r}")
        try:
            return SortOrder(order_id, tuple(SortField.from_json(f) for f in obj["fields"]))
        except ValidationError as e:
            raise CorruptMetadataError(str(e)) from e

    def __str__(self) -> str:
        return f"[{', '.join(str(f) for f in self.fields)}]"


UNSORTED_SORT_ORDER = SortOrder(0, ())


def build_sort_order(
    schema: Schema,
    order_like: SortOrder | Iterable[str | tuple[str, ...]] | None,
    order_id: int = 1,
) -> SortOrder:
    """A sort order from column names or ``(column, "asc"|"desc"[, "nulls-first"|"nulls-last"])``.

    Fields use the identity transform. ``None`` or an empty list is the unsorted order.
    """
    if order_like is None:
        return UNSORTED_SORT_ORDER
    if isinstance(order_like, SortOrder):
        order_like.check(schema)
        return order_like
    fields = [_field_from_spec(schema, item) for item in order_like]
    if not fields:
        return UNSORTED_SORT_ORDER
    order = SortOrder(order_id, tuple(fields))
    order.check(schema)
    return order


def _field_from_spec(schema: Schema, item: str | tuple[str, ...]) -> SortField:
    column, *rest = (item,) if isinstance(item, str) else tuple(item)
    if not schema.has_field(column):
        raise ValidationError(f"unknown sort column {column!r}; schema has {schema.column_names}")
    try:
        direction = SortDirection(rest[0]) if rest else SortDirection.ASC
        default_nulls = "nulls-first" if direction == SortDirection.ASC else "nulls-last"
        null_order = NullOrder(rest[1] if len(rest) > 1 else default_nulls)
    except ValueError as e:
        raise ValidationError(f"sort column {column!r}: {e}") from e
    return SortField(schema.find_field(column).field_id, Identity(), direction, null_order)


def _single(ids: Any) -> int:
    if isinstance(ids, list) and len(ids) == 1:
        return int(ids[0])
    raise CorruptMetadataError(f"multi-argument transforms are not supported: source-ids {ids!r}")
