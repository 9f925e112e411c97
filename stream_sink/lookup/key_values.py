"""Keys of Arrow rows as NumPy ids and as Python values: the two forms the CDC change
plan and the positions indexes of both table formats work in.

Invariants: :func:`dense_key_ids` gives equal ids exactly to equal keys (an integer key
is its own id; others are dictionary-encoded); :func:`key_values` gives hashable values
that compare equal exactly when the keys do (temporal values as integers).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def dense_key_ids(columns: Sequence[pa.ChunkedArray | pa.Array]) -> tuple[np.ndarray, int]:
    """Per row an int64 equal exactly for equal keys, and the number of keys (-1: unknown).

    One integer column is its own id (no encoding); other keys are dictionary-encoded
    to ids in ``[0, n)``.
    """
    if len(columns) == 1 and pa.types.is_integer(columns[0].type):
        return np.asarray(to_numpy(columns[0]), dtype=np.int64), -1
    ids: np.ndarray | None = None
    count = 0
    for column in columns:
        indices, cardinality = _encode(column)
        if ids is None:
            ids, count = indices, cardinality
        else:
            ids, count = _encode(pa.array(ids * cardinality + indices))
    if ids is None:
        raise ValueError("a key needs at least one column")
    return ids, count


def _encode(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, int]:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    encoded = pc.dictionary_encode(array)
    return np.asarray(to_numpy(encoded.indices), dtype=np.int64), len(encoded.dictionary)


def key_values(columns: Sequence[pa.ChunkedArray | pa.Array], rows: np.ndarray) -> list[Hashable]:
    """Hashable Python keys of ``rows``: a scalar for one column, else a tuple.

    Temporal values become integers (cheaper than datetime objects, and exact).
    """
    lists = [_python_values(c.take(pa.array(rows, type=pa.int64()))) for c in columns]
    if len(lists) == 1:
        return lists[0]
    return list(zip(*lists, strict=True))


def _python_values(values: pa.ChunkedArray | pa.Array) -> list[Hashable]:
    t = values.type
    if pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_duration(t):
        values = values.cast(pa.int64())
    elif pa.types.is_date32(t) or pa.types.is_time32(t):
        values = values.cast(pa.int32())
    elif pa.types.is_date64(t):
        values = values.cast(pa.int64())
    return values.to_pylist()  # type: ignore[no-any-return]


def to_numpy(array: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array.to_numpy(zero_copy_only=False)
