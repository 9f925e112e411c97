"""Row filters: a small, unbound expression language over column names.

``col("id") == 5``, ``col("ts") >= "2024-01-01"``, ``col("k").isin([1, 2])``,
``col("x").is_null()``, combined with ``&``, ``|`` and ``~``; or the string form
``"id = 5 and ts >= '2024-01-01'"`` (see :func:`parse_filter`).

Invariants:
- Expressions are immutable values that name columns; they are resolved to field
  ids and typed literals by :func:`stream_sink.read.binding.bind` against a schema.
- Semantics are SQL's: a comparison with a null value is not true, so rows whose
  column is null never match ``==``, ``!=``, ``<``, ``in`` and their negations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
SET_OPS = ("in", "not_in")
UNARY_OPS = ("is_null", "not_null")

NEGATED_OP = {
    "==": "!=",
    "!=": "==",
    "<": ">=",
    ">=": "<",
    ">": "<=",
    "<=": ">",
    "in": "not_in",
    "not_in": "in",
    "is_null": "not_null",
    "not_null": "is_null",
}


class Expression:
    """Base of every filter expression (unbound or bound)."""

    def __and__(self, other: Expression) -> Expression:
        return and_(self, _expr(other))

    def __or__(self, other: Expression) -> Expression:
        return or_(self, _expr(other))

    def __invert__(self) -> Expression:
        return not_(self)

    def __bool__(self) -> bool:
        raise TypeError(
            "a filter expression has no truth value; combine with &, |, ~ instead of and/or/not"
        )


@dataclass(frozen=True)
class AlwaysTrue(Expression):
    def __str__(self) -> str:
        return "true"


@dataclass(frozen=True)
class AlwaysFalse(Expression):
    def __str__(self) -> str:
        return "false"


@dataclass(frozen=True)
class And(Expression):
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"({self.left} and {self.right})"


@dataclass(frozen=True)
class Or(Expression):
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"({self.left} or {self.right})"


@dataclass(frozen=True)
class Not(Expression):
    child: Expression

    def __str__(self) -> str:
        return f"not {self.child}"


@dataclass(frozen=True)
class Predicate(Expression):
    """``op`` applied to the column ``name`` (dotted for struct fields) and ``values``
    (one literal for comparisons, several for ``in``, none for null checks)."""

    op: str
    name: str
    values: tuple[Any, ...] = ()

    def __str__(self) -> str:
        if self.op in UNARY_OPS:
            return f"{self.name} {self.op.replace('_', ' ')}"
        if self.op in SET_OPS:
            return f"{self.name} {self.op.replace('_', ' ')} {list(self.values)!r}"
        return f"{self.name} {self.op} {self.values[0]!r}"


class Reference:
    """A column by name; comparison operators build predicates.

    Not hashable and not usable as a truth value: ``col("a") == 1`` is a filter,
    not a boolean."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a column name must be a non-empty string, got {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return f"col({self.name!r})"

    def _cmp(self, op: str, value: Any) -> Predicate:
        if value is None:
            raise TypeError(f"compare {self.name!r} with None: use is_null() or not_null()")
        return Predicate(op, self.name, (value,))

    def __eq__(self, value: Any) -> Predicate:  # type: ignore[override]
        return self._cmp("==", value)

    def __ne__(self, value: Any) -> Predicate:  # type: ignore[override]
        return self._cmp("!=", value)

    def __lt__(self, value: Any) -> Predicate:
        return self._cmp("<", value)

    def __le__(self, value: Any) -> Predicate:
        return self._cmp("<=", value)

    def __gt__(self, value: Any) -> Predicate:
        return self._cmp(">", value)

    def __ge__(self, value: Any) -> Predicate:
        return self._cmp(">=", value)

    def isin(self, values: Iterable[Any]) -> Predicate:
        return Predicate("in", self.name, _set_values(self.name, values))

    def not_in(self, values: Iterable[Any]) -> Predicate:
        return Predicate("not_in", self.name, _set_values(self.name, values))

    def is_null(self) -> Predicate:
        return Predicate("is_null", self.name)

    def not_null(self) -> Predicate:
        return Predicate("not_null", self.name)


def _set_values(name: str, values: Iterable[Any]) -> tuple[Any, ...]:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"isin on {name!r} takes a collection of values, got {values!r}")
    out = tuple(values)
    if any(v is None for v in out):
        raise TypeError(f"isin on {name!r} cannot hold None: combine with is_null()")
    return out


def col(name: str) -> Reference:
    """The column ``name`` (``"a.b"`` for field ``b`` of struct column ``a``)."""
    return Reference(name)


# --- combinators that fold constants -----------------------------------------------


def and_(left: Expression, right: Expression) -> Expression:
    if isinstance(left, AlwaysFalse) or isinstance(right, AlwaysFalse):
        return AlwaysFalse()
    if isinstance(left, AlwaysTrue):
        return right
    if isinstance(right, AlwaysTrue):
        return left
    return And(left, right)


def or_(left: Expression, right: Expression) -> Expression:
    if isinstance(left, AlwaysTrue) or isinstance(right, AlwaysTrue):
        return AlwaysTrue()
    if isinstance(left, AlwaysFalse):
        return right
    if isinstance(right, AlwaysFalse):
        return left
    return Or(left, right)


def not_(child: Expression) -> Expression:
    if isinstance(child, AlwaysTrue):
        return AlwaysFalse()
    if isinstance(child, AlwaysFalse):
        return AlwaysTrue()
    if isinstance(child, Not):
        return child.child
    return Not(child)


def _expr(value: Any) -> Expression:
    if not isinstance(value, Expression):
        raise TypeError(f"expected a filter expression, got {value!r}")
    return value


def to_expression(row_filter: Expression | str | None) -> Expression:
    """A filter from what a caller passes: an expression, a string, or None (all rows)."""
    if row_filter is None:
        return AlwaysTrue()
    if isinstance(row_filter, str):
        from stream_sink.read.filter_parser import parse_filter

        return parse_filter(row_filter)
    return _expr(row_filter)
