"""Counting ties in CDC order values, on the executors.

A tie is a change whose key and order value equal those of the change just before it
in its task (rows arrive sorted by key, order value, input sequence: see
:mod:`.guard`); ties are applied in input order, the last one winning, and counted
so an operator can see when the order column does not order a key's changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def leaves(batch: pa.RecordBatch, columns: Sequence[str]) -> list[pa.Array]:
    """The leaf arrays of ``columns`` (struct columns flattened)."""
    out: list[pa.Array] = []
    stack = [batch.column(c) for c in columns]
    while stack:
        arr = stack.pop(0)
        if pa.types.is_struct(arr.type):
            stack[0:0] = list(arr.flatten())
        else:
            out.append(arr)
    return out


def count_ties(
    batches: Iterator[pa.RecordBatch],
    columns: Sequence[str],
    drop: Sequence[str],
    counter: list[int],
) -> Iterator[pa.RecordBatch]:
    """``batches`` without the ``drop`` columns; ties on ``columns`` added to counter[0]."""
    previous: list[pa.Array] = []
    for batch in batches:
        if batch.num_rows:
            arrays = leaves(batch, columns)
            if previous:
                arrays = [pa.concat_arrays([p, a]) for p, a in zip(previous, arrays, strict=True)]
            same = pc.equal(arrays[0][1:], arrays[0][:-1])
            for arr in arrays[1:]:
                same = pc.and_(same, pc.equal(arr[1:], arr[:-1]))
            counter[0] += int(pc.sum(pc.fill_null(same, False)).as_py() or 0)
            previous = [a[len(a) - 1 :] for a in arrays]
        keep = [i for i, n in enumerate(batch.schema.names) if n not in drop]
        yield batch.select(keep) if len(keep) < batch.num_columns else batch


def add_to(accumulator: Any, counter: list[int]) -> None:
    if accumulator is not None and counter[0]:
        accumulator.add(counter[0])
