"""Rows for the dictionary-encoding tests of both writers: three columns of distinct
values (written plain), one repeated string column, a repeated list and an all-null
column (kept with a dictionary)."""

from __future__ import annotations

import pyarrow as pa

WITH_DICTIONARY = {
    "id": False,
    "ts": False,
    "value": False,
    "category": True,
    "tags.list.element": True,
    "maybe": True,
}
"""Which columns of :func:`dictionary_rows` keep a dictionary (by Parquet column path)."""


def dictionary_rows(n: int) -> pa.Table:
    """``n`` rows: ``id``, ``ts``, ``value`` distinct; ``category`` (20 values), ``tags``
    (a list of 3 values) and ``maybe`` (all null) repeated."""
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "ts": pa.array(
                [1_714_521_600_000_000 + i * 1000 for i in range(n)], pa.timestamp("us", "UTC")
            ),
            "value": pa.array([i * 0.618033 for i in range(n)], pa.float64()),
            "category": pa.array([f"cat-{i % 20}" for i in range(n)]),
            "tags": pa.array([[f"t{i % 3}"] for i in range(n)], pa.list_(pa.string())),
            "maybe": pa.array([None] * n, pa.int64()),
        }
    )
