"""Projecting row filters onto partition specs, and per-file residual filters.

Inclusive projection (:func:`project`): a filter over source columns becomes a
filter over partition fields that is true for every partition holding a matching
row. Per transform:

- identity: the same predicate;
- bucket: ``==`` and ``in`` on the bucket numbers; anything else matches all;
- truncate, year, month, day, hour (order preserving): ``==``/``in`` on the
  transformed values, ``<``/``<=`` become ``<=`` and ``>``/``>=`` become ``>=`` of
  the transformed value; ``!=``/``not in`` match all;
- null checks carry over for every transform but void (all map null to null).

Residuals (:func:`residual`): what still has to be checked row by row in a file
of a given partition. Predicates on identity-partitioned columns are decided by
the partition value; the rest stay.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from stream_sink.exceptions import StreamSinkError
from stream_sink.read.binding import BoundPredicate, rewrite
from stream_sink.read.evaluators import evaluate_value
from stream_sink.read.expressions import AlwaysFalse, AlwaysTrue, Expression, and_
from stream_sink.read.literals import to_arrow_array
from stream_sink.table.partitioning import PartitionField, PartitionSpec
from stream_sink.table.transforms import Bucket, Identity, Void
from stream_sink.table.values import to_internal


def project(expr: Expression, spec: PartitionSpec) -> Expression:
    """The inclusive projection of bound ``expr`` onto ``spec``'s partition fields
    (predicates then name partition field ids)."""
    if not spec.fields:
        return AlwaysTrue()

    def leaf(p: BoundPredicate) -> Expression:
        out: Expression = AlwaysTrue()
        for pf in spec.fields:
            if pf.source_id == p.field_id:
                out = and_(out, _project_one(p, pf))
        return out

    return rewrite(expr, leaf)


def _project_one(p: BoundPredicate, pf: PartitionField) -> Expression:
    t = pf.transform
    if isinstance(t, Void):
        return AlwaysTrue()
    try:
        result_type = t.result_type(p.field_type)
    except StreamSinkError:
        return AlwaysTrue()
    if p.op in ("is_null", "not_null"):
        return BoundPredicate(p.op, pf.field_id, (pf.name,), result_type)
    if isinstance(t, Identity):
        return BoundPredicate(p.op, pf.field_id, (pf.name,), result_type, p.values)
    if p.op in ("!=", "not_in"):
        return AlwaysTrue()
    if isinstance(t, Bucket) and p.op not in ("==", "in"):
        return AlwaysTrue()
    if not isinstance(t, Bucket) and not t.preserves_order:
        return AlwaysTrue()
    values = _transformed(pf, p)
    if values is None:
        return AlwaysTrue()
    op = {"<": "<=", ">": ">="}.get(p.op, p.op)
    if op == "in":
        values = tuple(sorted(set(values)))
    return BoundPredicate(op, pf.field_id, (pf.name,), result_type, values)


def _transformed(pf: PartitionField, p: BoundPredicate) -> tuple[Any, ...] | None:
    """The literals of ``p`` through ``pf``'s transform, as internal values."""
    try:
        source = to_arrow_array(p.field_type, list(p.values))
        out = pf.transform.apply(source, p.field_type)
        values = to_internal(out, pf.transform.result_type(p.field_type))
    except (StreamSinkError, pa.ArrowException, ValueError, TypeError, OverflowError):
        return None
    if any(v is None for v in values):
        return None
    return tuple(values)


def residual(expr: Expression, spec: PartitionSpec, partition: tuple[Any, ...]) -> Expression:
    """``expr`` with predicates on identity-partitioned columns replaced by their
    value on ``partition`` (a file's partition tuple in ``spec``)."""
    identity = {
        pf.source_id: i for i, pf in enumerate(spec.fields) if isinstance(pf.transform, Identity)
    }
    if not identity:
        return expr

    def leaf(p: BoundPredicate) -> Expression:
        pos = identity.get(p.field_id)
        if pos is None or pos >= len(partition):
            return p
        value = partition[pos]
        if p.op == "is_null":
            hit = value is None
        elif p.op == "not_null":
            hit = value is not None
        else:
            hit = value is not None and evaluate_value(p.op, value, p.values)
        return AlwaysTrue() if hit else AlwaysFalse()

    return rewrite(expr, leaf)
