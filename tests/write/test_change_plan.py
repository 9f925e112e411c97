"""The vectorized per-batch plan equals applying Flink's delta writer rules row by row."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Hashable
from itertools import repeat

import numpy as np
import pyarrow as pa
import pytest

from stream_sink.exceptions import MissingColumnError, NullKeyError, UnknownRowKindError
from stream_sink.lookup.key_values import dense_key_ids, key_values
from stream_sink.write.change_plan import (
    OP_SKIP,
    check_no_null_keys,
    decode_row_kinds,
    link_keys,
    ops_for,
    plan_changes,
    require_columns,
)


def reference(batches: list[list[tuple[str, Hashable]]], upsert: bool) -> list[tuple]:
    """Flink's BaseEqualityDeltaWriter, one row at a time. Positions count inserts."""
    inserted: dict[Hashable, int] = {}
    out = []
    position = 0
    for batch in batches:
        written, pos_deletes, eq_deletes = [], [], []
        for row, (kind, key) in enumerate(batch):
            insert = kind in ("+I", "+U")
            if kind == "-U" and upsert:
                continue
            if not insert or upsert:  # delete(row) / deleteKey(key)
                if key in inserted:
                    pos_deletes.append(inserted.pop(key))
                else:
                    eq_deletes.append(row)
            if insert:  # write(row): put returns the replaced position
                previous = inserted.get(key)
                if previous is not None:
                    pos_deletes.append(previous)
                inserted[key] = position
                written.append(row)
                position += 1
        out.append((written, sorted(pos_deletes), eq_deletes))
    return out


def vectorized(batches: list[list[tuple[str, Hashable]]], upsert: bool) -> list[tuple]:
    inserted: dict[Hashable, int] = {}
    out = []
    position = 0
    for batch in batches:
        kinds = decode_row_kinds(pa.array([k for k, _ in batch]), "_row_kind", "t")
        ops = ops_for(kinds, upsert)
        rows = np.flatnonzero(ops != OP_SKIP)
        keys = [pa.array([key for _, key in batch]).take(pa.array(rows))]
        ids, distinct = dense_key_ids(keys)
        links = link_keys(ids, distinct)
        firsts = np.flatnonzero(links.previous < 0)
        known = np.full(len(rows), -1, dtype=np.int64)
        known[firsts] = list(map(inserted.get, key_values(keys, firsts), repeat(-1)))
        plan = plan_changes(ops[rows], links, known, upsert)
        positions = np.arange(position, position + len(plan.inserts))
        position += len(plan.inserts)
        pos_deletes = np.concatenate([plan.deleted_known, positions[plan.deleted_inserts]])
        for key in key_values(keys, plan.dropped_rows):
            inserted.pop(key, None)
        kept = key_values(keys, plan.kept_rows)
        inserted.update(zip(kept, positions[plan.kept_inserts].tolist(), strict=True))
        out.append(
            (
                rows[plan.inserts].tolist(),
                sorted(pos_deletes.tolist()),
                rows[plan.equality_deletes].tolist(),
            )
        )
    return out


@pytest.mark.parametrize("upsert", [False, True])
@pytest.mark.parametrize("seed", range(20))
def test_plan_matches_row_by_row_rules(seed: int, upsert: bool) -> None:
    rng = random.Random(seed)
    key_space = rng.choice([3, 10, 1000])
    kinds = ["+I", "-U", "+U", "-D"]
    batches = [
        [(rng.choice(kinds), rng.randrange(key_space)) for _ in range(rng.randrange(0, 40))]
        for _ in range(rng.randrange(1, 6))
    ]
    assert vectorized(batches, upsert) == reference(batches, upsert)


@pytest.mark.parametrize("seed", range(12))
def test_links_name_each_keys_previous_first_and_last_row(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    space = int(rng.choice([1, 5, 50, 10**6, 10**12]))
    ids = rng.integers(0, space, n)
    links = link_keys(ids, -1)
    seen: dict[int, int] = {}
    previous, first, last = [], {}, {}
    for row, key in enumerate(ids.tolist()):
        previous.append(seen.get(key, -1))
        seen[key] = row
        first.setdefault(key, row)
        last[key] = row
    assert links.previous.tolist() == previous
    assert links.is_last.tolist() == [last[k] == r for r, k in enumerate(ids.tolist())]
    assert links.firsts.tolist() == sorted(first.values())
    assert links.lasts.tolist() == [last[ids[r]] for r in links.firsts.tolist()]


def test_update_within_batch_position_deletes_the_earlier_insert() -> None:
    batches = [[("+I", 1), ("+I", 2), ("-U", 1), ("+U", 1)], [("-D", 2), ("-D", 9)]]
    assert vectorized(batches, upsert=False) == [
        ([0, 1, 3], [0], []),
        ([], [1], [1]),
    ]


def test_upsert_deletes_each_new_key_by_equality_and_ignores_update_before() -> None:
    batches = [[("+I", 1), ("-U", 1), ("+U", 1), ("-D", 2)]]
    # +I 1: eq delete of key 1, insert at 0; -U ignored; +U 1: pos delete 0, insert at 1;
    # -D 2: eq delete
    assert vectorized(batches, upsert=True) == [([0, 2], [0], [0, 3])]


def test_composite_and_temporal_keys_are_distinguished_by_every_column() -> None:
    ts = [dt.datetime(2024, 1, 1, 0, 0, 0, i) for i in (1, 1, 2, 1)]
    keys = [pa.array([1, 1, 1, 2]), pa.array(ts, type=pa.timestamp("us"))]
    ids, distinct = dense_key_ids(keys)
    assert distinct == 3
    assert ids[0] == ids[1] and len({ids[0], ids[2], ids[3]}) == 3
    assert key_values(keys, np.array([0, 2])) == [
        (1, 1704067200000001),
        (1, 1704067200000002),
    ]


def test_unknown_and_null_row_kinds_name_the_row() -> None:
    with pytest.raises(UnknownRowKindError, match=r"'X'.*'_row_kind' at row 2"):
        decode_row_kinds(pa.array(["+I", "-D", "X"]), "_row_kind", "db.t")
    with pytest.raises(UnknownRowKindError, match="at row 1"):
        decode_row_kinds(pa.chunked_array([["+I"], [None]], pa.string()), "_row_kind", "db.t")
    dictionary = pa.array(["+U", "-D", "+U"]).dictionary_encode()
    assert decode_row_kinds(dictionary, "_row_kind", "db.t").tolist() == [2, 3, 2]


def test_missing_columns_and_null_keys_are_named() -> None:
    batch = pa.table({"id": [1, None, 3], "data": ["a", "b", "c"]})
    with pytest.raises(MissingColumnError, match="row kind column '_row_kind'"):
        require_columns(batch, ["_row_kind"], "row kind", "db.t")
    with pytest.raises(NullKeyError, match="'id' is null at row 1"):
        check_no_null_keys(batch, ["data", "id"], "db.t")
