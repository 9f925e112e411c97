"""A CDC micro-batch read in one task, checked and ordered inside that task.

When Spark reads a whole CDC micro-batch in one partition (see
:mod:`stream_sink.spark.foreach_batch.single_task`),
every change of a key is already in the one task, so the batch needs neither Spark's
shuffle nor its sort nor the input sequence column: the task gets the rows in input
order and :class:`TaskSort` does what :mod:`.guard` and
:func:`.distribution.distribute_cdc` do otherwise.

Invariants (the same as the distributed route's, so readers see the same table):
- Every row is checked before any row is passed on: a null equality field raises
  NullKeyError, a null order value (or a null field of a struct order column) raises
  ValidationError, naming the batch and the input row (its non-null values as JSON,
  cut to 200 characters), as the Spark-side guard does.
- Rows come out ordered by (key columns, order columns), and rows equal on all of them
  stay in input order (a stable sort): ties are applied in input order, the last one
  winning, exactly as the input sequence makes the distributed route do.
- The task holds its whole batch in memory; the driver takes this route only for
  batches whose estimated size is bounded (:data:`.single_task.MAX_BYTES`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.exceptions import NullKeyError, ValidationError
from stream_sink.spark.cdc.guard import ORDER_HINT, SHOWN_CHARS

OUT_ROWS = 65_536
"""Rows per batch handed on to the writer."""


@dataclass(frozen=True)
class TaskSort:
    """``mapInArrow`` stage: the task's rows checked, then sorted by key and order."""

    keys: tuple[str, ...]
    order_by: tuple[str, ...]
    batch: str
    """How messages name the batch, e.g. ``batch 3``."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [b for b in batches if b.num_rows]
        if not rows:
            return
        table = pa.Table.from_batches(rows).combine_chunks()
        sort_columns = self._checked_leaves(table)
        names = [f"c{i}" for i in range(len(sort_columns))]
        order = pc.sort_indices(
            pa.table(sort_columns, names=names), sort_keys=[(n, "ascending") for n in names]
        )
        yield from table.take(order).to_batches(max_chunksize=OUT_ROWS)

    def _checked_leaves(self, table: pa.Table) -> list[pa.Array]:
        """Key and order leaf arrays, in sort priority; raises on the first null."""
        out: list[pa.Array] = []
        for name in self.keys:
            column = _single(table.column(name))
            if column.null_count:
                text = f"{self.batch}: equality field {name!r} is null in input row "
                raise NullKeyError(text + _row_text(table, column))
            out.append(column)
        for name in self.order_by:
            for path, leaf in _leaves(name, _single(table.column(name))):
                if leaf.null_count:
                    text = f"{self.batch}: order column {path!r} is null in input row "
                    raise ValidationError(text + _row_text(table, leaf) + ORDER_HINT)
                out.append(leaf)
        return out


def _single(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _leaves(name: str, array: pa.Array) -> list[tuple[str, pa.Array]]:
    """``(dotted path, array)`` of every leaf of ``array``; struct nulls carried into
    their fields (``StructArray.flatten``), so a null struct shows as null leaves."""
    if not pa.types.is_struct(array.type):
        return [(name, array)]
    fields = array.flatten()
    out: list[tuple[str, pa.Array]] = []
    for i, child in enumerate(fields):
        out.extend(_leaves(f"{name}.{array.type.field(i).name}", child))
    return out


def _row_text(table: pa.Table, nulls: pa.Array) -> str:
    """The first input row where ``nulls`` is null, as compact JSON of its non-null
    values (Spark's ``to_json`` leaves null fields out too)."""
    row = int(pc.index(nulls.is_null(), True).as_py())
    values = {k: v for k, v in table.slice(row, 1).to_pylist()[0].items() if v is not None}
    return json.dumps(values, separators=(",", ":"), default=_text, ensure_ascii=False)[
        :SHOWN_CHARS
    ]


def _text(value: Any) -> str:
    return value.hex() if isinstance(value, bytes) else str(value)
