"""Bound filters as ``pyarrow.compute`` expressions, for filtering rows.

Columns are referenced by their name path in the scan's output schema (which is
the table schema's names, whatever the file called them). Literals are typed as
the column's Arrow type, so comparisons never go through Python objects.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.read.binding import BoundPredicate
from stream_sink.read.expressions import AlwaysFalse, AlwaysTrue, And, Expression, Or
from stream_sink.read.literals import to_arrow_array
from stream_sink.table.types import IcebergType


def to_arrow_expression(expr: Expression) -> pc.Expression:
    if isinstance(expr, AlwaysTrue):
        return pc.scalar(True)
    if isinstance(expr, AlwaysFalse):
        return pc.scalar(False)
    if isinstance(expr, And):
        return to_arrow_expression(expr.left) & to_arrow_expression(expr.right)
    if isinstance(expr, Or):
        return to_arrow_expression(expr.left) | to_arrow_expression(expr.right)
    if isinstance(expr, BoundPredicate):
        return _predicate(expr)
    raise TypeError(f"cannot filter rows with {expr!r}")


def _predicate(p: BoundPredicate) -> pc.Expression:
    ref = pc.field(*p.path)
    if p.op == "is_null":
        return ref.is_null()
    if p.op == "not_null":
        return ref.is_valid()
    if p.op in ("in", "not_in"):
        found = ref.isin(_array(p.field_type, list(p.values)))
        # ``isin`` is false (not null) on a null value; SQL's NOT IN is not true there
        return found if p.op == "in" else ~found & ref.is_valid()
    lit = pc.scalar(_array(p.field_type, [p.value])[0])
    return {
        "==": ref == lit,
        "!=": ref != lit,
        "<": ref < lit,
        "<=": ref <= lit,
        ">": ref > lit,
        ">=": ref >= lit,
    }[p.op]


def _array(t: IcebergType, values: list[Any]) -> pa.Array:
    """Values typed as the column; ones out of the column type's range (an int
    column compared with a long) keep their natural Arrow type."""
    try:
        return to_arrow_array(t, values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array(values)
