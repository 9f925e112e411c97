"""Tests stream_sink.lookup (the package), stream_sink.lookup.row_positions and
stream_sink.lookup.key_values: key -> (file, row) of live rows, as a dict of lists
would hold them, for integer, string and composite keys."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from stream_sink.lookup.key_values import dense_key_ids, key_values
from stream_sink.lookup.row_positions import ROW_BITS, RowPositions, by_file, first_rows


def _columns(keys: list[object]) -> list[pa.Array]:
    if isinstance(keys[0], tuple):
        return [pa.array([k[0] for k in keys]), pa.array([k[1] for k in keys])]  # type: ignore[index]
    return [pa.array(keys)]


KEYS = {
    "int": lambda i: i * 7,
    "str": lambda i: f"key-{i}",
    "composite": lambda i: (i % 13, f"k{i}"),
}


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_take_returns_every_live_row_of_the_keys_asked_and_forgets_them(kind: str) -> None:
    key = KEYS[kind]
    rng = random.Random(3)
    index: RowPositions[str] = RowPositions()
    expected: dict[object, set[int]] = {}
    for f in range(4):
        rows = [key(rng.randrange(300)) for _ in range(200)]  # repeats: duplicate live rows
        live = np.array(sorted(rng.sample(range(200), 150)), dtype=np.int64)
        index.add(f"file-{f}", f"entry-{f}", _columns(rows), live)
        for r in live.tolist():
            expected.setdefault(rows[r], set()).add(f << ROW_BITS | r)
    assert index.live == sum(len(v) for v in expected.values())
    asked = [key(i) for i in range(0, 300, 2)] * 2  # every key asked twice
    taken = index.take(_columns(asked))
    want = set().union(*(expected.pop(k, set()) for k in asked))
    assert sorted(taken.tolist()) == sorted(want)
    assert len(taken) == len(want)  # each row once
    assert index.take(_columns(asked)).size == 0  # gone once taken
    assert index.live == sum(len(v) for v in expected.values())


def test_a_file_named_again_keeps_its_ordinal_and_takes_the_new_entry() -> None:
    index: RowPositions[str] = RowPositions()
    index.add("a", "a@v1", [pa.array([1, 2])], np.array([0, 1]))
    index.add("b", "b@v1", [pa.array([3])], np.array([0]))
    assert index.ordinal("a", "a@v2") == 0
    assert index.files == ["a@v2", "b@v1"]
    taken = index.take([pa.array([2, 3])])
    assert [(o, rows.tolist()) for o, rows in by_file(np.sort(taken))] == [(0, [1]), (1, [0])]
    assert index.file(int(taken[0])) in {"a@v2", "b@v1"}


def test_first_rows_and_key_ids_agree_with_python_values() -> None:
    cols = [pa.array([5, 3, 5, 1, 3]), pa.array(["x", "y", "x", "z", "w"])]
    assert first_rows(cols).tolist() == [0, 1, 3, 4]
    ids, count = dense_key_ids(cols)
    values = key_values(cols, np.arange(5))
    assert count == 4
    for i in range(5):
        for j in range(5):
            assert (ids[i] == ids[j]) == (values[i] == values[j])


def test_drop_rows_forgets_only_entries_at_those_rows_and_refuses_what_it_cannot_do() -> None:
    index: RowPositions[str] = RowPositions()
    index.add("a", "a", [pa.array([1, 2, 3])], np.array([0, 1, 2]))
    index.add("b", "b", [pa.array([9])], np.array([0]))
    index.take([pa.array([2])])  # key 2 taken: its row is no entry any more
    index.add("b2", "b2", [pa.array([3])], np.array([0]))  # key 3 now kept aside (a duplicate)
    assert not index.drop_rows("a", [pa.array([1])], np.array([0]))  # rows kept aside: rebuild
    fresh: RowPositions[str] = RowPositions()
    fresh.add("a", "a", [pa.array([1, 2, 3])], np.array([0, 1, 2]))
    fresh.add("c", "c", [pa.array([4])], np.array([0]))
    assert fresh.drop_rows("a", [pa.array([1, 4])], np.array([0, 2]))  # 4's entry is c's row
    assert sorted(fresh.take([pa.array([1, 2, 3, 4])]).tolist()) == [1, 2, 1 << ROW_BITS]
    assert not fresh.drop_rows("unknown", [pa.array([1])], np.array([0]))
    assert not fresh.drop_rows("a", [pa.array([5, 5])], np.array([0, 1]))  # a key twice
