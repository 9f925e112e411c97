"""Splitting a batch into partitions: every row once, in input order, nulls and NaN grouped."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from stream_sink.table.arrow import schema_from_arrow, schema_to_arrow
from stream_sink.table.partitioning import build_partition_spec
from stream_sink.write.grouping import group_by_partition

ARROW = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
SCHEMA = schema_from_arrow(ARROW)


def groups(data: dict[str, list[Any]], spec: list[tuple[Any, ...]]) -> dict[str, list[int]]:
    table = pa.table(data, schema=schema_to_arrow(SCHEMA))
    out: dict[str, list[int]] = {}
    for g in group_by_partition(table, build_partition_spec(SCHEMA, spec).bind(SCHEMA), SCHEMA):
        ids = g.rows.column("id").to_pylist()
        positions = list(range(table.num_rows)) if g.indices is None else g.indices.to_pylist()
        assert ids == [table.column("id")[p].as_py() for p in positions]
        assert g.nbytes is None or g.nbytes == g.rows.nbytes
        out[repr(g.partition)] = ids
    return out


def test_rows_grouped_by_value_in_input_order_with_nulls_together() -> None:
    data = {
        "id": [1, 2, 3, 4, 5, 6],
        "name": ["b", None, "a", "b", None, "a"],
        "score": [0.0] * 6,
    }
    assert groups(data, [("identity", "name")]) == {
        "('a',)": [3, 6],
        "('b',)": [1, 4],
        "(None,)": [2, 5],
    }


def test_several_fields_split_on_any_change() -> None:
    data = {
        "id": [1, 2, 3, 4, 5],
        "name": ["x", "x", "y", "x", None],
        "score": [1.0, 2.0, 1.0, 1.0, 1.0],
    }
    assert groups(data, [("identity", "name"), ("identity", "score")]) == {
        "('x', 1.0)": [1, 4],
        "('x', 2.0)": [2],
        "('y', 1.0)": [3],
        "(None, 1.0)": [5],
    }


def test_nan_is_one_partition() -> None:
    nan = math.nan
    data = {"id": [1, 2, 3, 4], "name": ["a"] * 4, "score": [nan, 1.0, nan, None]}
    got = groups(data, [("identity", "score")])
    assert sorted(got.values()) == [[1, 3], [2], [4]]


def test_one_partition_keeps_the_batch_as_is() -> None:
    table = pa.table(
        {"id": [5, 3, 9], "name": ["a"] * 3, "score": [1.0] * 3}, schema=schema_to_arrow(SCHEMA)
    )
    spec = build_partition_spec(SCHEMA, [("identity", "name")]).bind(SCHEMA)
    (only,) = group_by_partition(table, spec, SCHEMA)
    assert only.indices is None and only.rows is table and only.partition == ("a",)


def test_transforms_group_by_their_result() -> None:
    data = {"id": list(range(40)), "name": ["n"] * 40, "score": [0.0] * 40}
    got = groups(data, [("bucket", "id", 4)])
    assert sorted(i for ids in got.values() for i in ids) == list(range(40))
    assert len(got) == 4
    assert all(ids == sorted(ids) for ids in got.values())


def test_empty_batch_has_no_groups() -> None:
    table = pa.table({"id": [], "name": [], "score": []}, schema=schema_to_arrow(SCHEMA))
    spec = build_partition_spec(SCHEMA, [("identity", "name")]).bind(SCHEMA)
    assert group_by_partition(table, spec, SCHEMA) == []


def test_group_sizes_are_arrows_own_count_of_each_slice() -> None:
    """The sizes the rolling writer sizes files by, computed for all groups at once,
    equal each slice's own ``nbytes`` (nulls, strings, binary, a sliced input)."""
    arrow = pa.schema(
        [
            ("id", pa.int64()),
            ("name", pa.string()),
            ("blob", pa.large_binary()),
            ("at", pa.timestamp("us", tz="UTC")),
        ]
    )
    schema = schema_from_arrow(arrow)
    n = 500
    table = pa.table(
        {
            "id": [None if i % 7 == 0 else i for i in range(n)],
            "name": [None if i % 5 == 0 else "x" * (i % 13) for i in range(n)],
            "blob": [b"z" * (i % 3) for i in range(n)],
            "at": [None if i % 11 == 0 else i for i in range(n)],
        },
        schema=schema_to_arrow(schema),
    ).slice(13, 450)
    spec = build_partition_spec(schema, [("bucket", "id", 16)]).bind(schema)
    found = group_by_partition(table, spec, schema)
    assert len(found) > 1
    assert [g.nbytes for g in found] == [g.rows.nbytes for g in found]
