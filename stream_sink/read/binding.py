"""Binding filters to a schema: column names to field ids, literals to internal values.

Invariants:
- A bound expression holds no ``Not``: negations are pushed into the predicates
  (``~(a < 1)`` is ``a >= 1``, De Morgan for and/or), which keeps SQL semantics
  because every predicate here is false on a null value.
- Every :class:`BoundPredicate` refers to a primitive field outside lists and maps,
  by id; its ``values`` are internal values of the field's type (see
  :mod:`stream_sink.read.literals`), sorted and deduplicated for ``in``/``not_in``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from stream_sink.exceptions import ValidationError
from stream_sink.read.expressions import (
    NEGATED_OP,
    SET_OPS,
    UNARY_OPS,
    AlwaysFalse,
    AlwaysTrue,
    And,
    Expression,
    Not,
    Or,
    Predicate,
    and_,
    or_,
)
from stream_sink.read.literals import LiteralError, is_nan, to_internal
from stream_sink.table.schema import Schema
from stream_sink.table.types import IcebergType, PrimitiveType


@dataclass(frozen=True)
class BoundPredicate(Expression):
    """``op`` on field ``field_id`` (reached by ``path`` of names) with internal ``values``."""

    op: str
    field_id: int
    path: tuple[str, ...]
    field_type: IcebergType
    values: tuple[Any, ...] = ()

    @property
    def value(self) -> Any:
        return self.values[0]

    def negate(self) -> BoundPredicate:
        return BoundPredicate(
            NEGATED_OP[self.op], self.field_id, self.path, self.field_type, self.values
        )

    def __str__(self) -> str:
        name = ".".join(self.path)
        if self.op in UNARY_OPS:
            return f"{name} {self.op}"
        if self.op in SET_OPS:
            return f"{name} {self.op} {list(self.values)!r}"
        return f"{name} {self.op} {self.value!r}"


def bind(expr: Expression, schema: Schema, where: str) -> Expression:
    """``expr`` resolved against ``schema``, negations pushed down.

    An unknown column, a column inside a list or map, or a literal that does not
    fit the column's type raises ValidationError naming the column and ``where``."""
    return _bind(expr, schema, where, negate=False)


def _bind(expr: Expression, schema: Schema, where: str, negate: bool) -> Expression:
    if isinstance(expr, (AlwaysTrue, AlwaysFalse)):
        if not negate:
            return expr
        return AlwaysFalse() if isinstance(expr, AlwaysTrue) else AlwaysTrue()
    if isinstance(expr, Not):
        return _bind(expr.child, schema, where, not negate)
    if isinstance(expr, (And, Or)):
        left = _bind(expr.left, schema, where, negate)
        right = _bind(expr.right, schema, where, negate)
        conj = isinstance(expr, And) != negate
        return and_(left, right) if conj else or_(left, right)
    if isinstance(expr, Predicate):
        bound = _bind_predicate(expr, schema, where)
        return bound.negate() if negate else bound
    if isinstance(expr, BoundPredicate):
        return expr.negate() if negate else expr
    raise ValidationError(f"filter on {where}: not a filter expression: {expr!r}")


def _bind_predicate(p: Predicate, schema: Schema, where: str) -> BoundPredicate:
    if not schema.has_field(p.name):
        raise ValidationError(
            f"filter on {where}: unknown column {p.name!r}; columns are {schema.column_names}"
        )
    field = schema.find_field(p.name)
    if not isinstance(field.field_type, PrimitiveType):
        raise ValidationError(
            f"filter on {where}: column {p.name!r} has nested type {field.field_type} "
            "and cannot be compared"
        )
    if field.field_id not in set(schema.primitive_field_ids_outside_collections()):
        raise ValidationError(f"filter on {where}: column {p.name!r} is inside a list or map")
    values = tuple(_literal(field.field_type, v, p.name, where) for v in p.values)
    if any(is_nan(v) for v in values):
        raise ValidationError(f"filter on {where}: column {p.name!r} cannot be compared with NaN")
    if p.op in SET_OPS:
        values = tuple(sorted(set(values)))
    return BoundPredicate(p.op, field.field_id, tuple(p.name.split(".")), field.field_type, values)


def _literal(t: IcebergType, value: Any, name: str, where: str) -> Any:
    try:
        return to_internal(t, value)
    except LiteralError as e:
        raise ValidationError(f"filter on {where}: column {name!r}: {e}") from e


# --- walking bound expressions ------------------------------------------------------------


def predicates(expr: Expression) -> Iterator[BoundPredicate]:
    """Every bound predicate in ``expr``."""
    if isinstance(expr, BoundPredicate):
        yield expr
    elif isinstance(expr, (And, Or)):
        yield from predicates(expr.left)
        yield from predicates(expr.right)


def referenced_field_ids(expr: Expression) -> set[int]:
    return {p.field_id for p in predicates(expr)}


def rewrite(expr: Expression, leaf: Callable[[BoundPredicate], Expression]) -> Expression:
    """``expr`` with every predicate replaced by ``leaf(predicate)``, constants folded."""
    if isinstance(expr, BoundPredicate):
        return leaf(expr)
    if isinstance(expr, And):
        return and_(rewrite(expr.left, leaf), rewrite(expr.right, leaf))
    if isinstance(expr, Or):
        return or_(rewrite(expr.left, leaf), rewrite(expr.right, leaf))
    return expr


def might_match(expr: Expression, leaf: Callable[[BoundPredicate], bool]) -> bool:
    """Evaluate ``expr`` with ``leaf`` deciding each predicate ("could any row match")."""
    if isinstance(expr, BoundPredicate):
        return leaf(expr)
    if isinstance(expr, And):
        return might_match(expr.left, leaf) and might_match(expr.right, leaf)
    if isinstance(expr, Or):
        return might_match(expr.left, leaf) or might_match(expr.right, leaf)
    return not isinstance(expr, AlwaysFalse)
