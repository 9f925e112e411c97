"""The CDC writer's key index equals a dict of keys, also when fingerprints collide."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stream_sink.catalogs import load_catalog
from stream_sink.lookup.key_index import KeyIndex
from stream_sink.write.cdc_writers import BaseDeltaWriter
from stream_sink.write.writer_factory import TaskWriterFactory

Key = Callable[[int], Hashable]


def _columns(keys: list[Hashable]) -> list[pa.Array]:
    if isinstance(keys[0], tuple):
        return [pa.array([k[i] for k in keys]) for i in range(len(keys[0]))]  # type: ignore[index]
    return [pa.array(keys)]


def _random_batch(rng: random.Random, key: Key, space: int) -> tuple[list[Hashable], Any]:
    """1 to 59 distinct random keys and their columns."""
    keys = list({key(rng.randrange(space)) for _ in range(rng.randrange(1, 60))})
    return keys, _columns(keys)


def _replay(index: KeyIndex, key: Key, seed: int, rounds: int, space: int) -> None:
    """Random lookups, remembers and forgets; after each round the index equals a dict."""
    rng = random.Random(seed)
    expected: dict[Hashable, int] = {}
    position = 0
    for _ in range(rounds):
        keys, columns = _random_batch(rng, key, space)
        rows = np.arange(len(keys))
        assert index.lookup(columns, rows).tolist() == [expected.get(k, -1) for k in keys]
        split = rng.randrange(len(keys) + 1)
        index.forget(columns, rows[:split])
        for k in keys[:split]:
            expected.pop(k, None)
        positions = np.arange(position, position + len(keys) - split)
        position += len(positions)
        index.remember(columns, rows[split:], positions)
        expected.update(zip(keys[split:], positions.tolist(), strict=True))
    everything = [key(i) for i in range(space)]
    found = index.lookup(_columns(everything), np.arange(space))
    assert found.tolist() == [expected.get(k, -1) for k in everything]


CASES: dict[str, Key] = {
    "int": lambda i: i,
    "string": lambda i: f"key-{i}",
    "composite": lambda i: (i % 7, f"k{i // 7}"),
}


@pytest.mark.parametrize("bits", [64, 2])
@pytest.mark.parametrize("case", sorted(CASES))
def test_index_equals_a_dict(case: str, bits: int) -> None:
    """With 2-bit fingerprints nearly every key collides: only the real values tell them
    apart (integer keys are hashed too below 64 bits)."""
    for seed in range(3):
        _replay(KeyIndex(hash_bits=bits), CASES[case], seed, rounds=25, space=150)


def _replay_settled(index: KeyIndex, key: Key, seed: int, rounds: int, space: int) -> None:
    """Random batches through one probe each (``find``, ``positions``, ``settle``), now
    and then with the probe made stale by a rebuild in between; equals a dict."""
    rng = random.Random(seed)
    expected: dict[Hashable, int] = {}
    position = 0
    for _ in range(rounds):
        keys, columns = _random_batch(rng, key, space)
        probe = index.find(columns, np.arange(len(keys)))
        assert index.positions(probe).tolist() == [expected.get(k, -1) for k in keys]
        if rng.random() < 0.2:  # other keys arrive first and force a rebuild
            extra = [key(space + position + i) for i in range(200)]
            spots = np.arange(10**6 + position, 10**6 + position + 200)
            index.remember(_columns(extra), np.arange(200), spots)
            expected.update(zip(extra, spots.tolist(), strict=True))
        final = [-1 if rng.random() < 0.3 else position + i for i in range(len(keys))]
        position += len(keys)
        index.settle(columns, probe, np.array(final, dtype=np.int64))
        for k, p in zip(keys, final, strict=True):
            if p < 0:
                expected.pop(k, None)
            else:
                expected[k] = p
        assert index.live == len(expected)
    everything = list(expected) + [key(i) for i in range(space)]
    found = index.lookup(_columns(everything), np.arange(len(everything)))
    assert found.tolist() == [expected.get(k, -1) for k in everything]


@pytest.mark.parametrize("bits", [64, 2])
@pytest.mark.parametrize("case", sorted(CASES))
def test_one_probe_per_batch_equals_a_dict(case: str, bits: int) -> None:
    for seed in range(3):
        _replay_settled(KeyIndex(hash_bits=bits), CASES[case], seed, rounds=40, space=150)


def test_compaction_keeps_live_keys_and_drops_deleted_ones() -> None:
    index = KeyIndex()
    keys = [pa.array(np.arange(20_000, dtype=np.int64))]
    index.remember(keys, np.arange(20_000), np.arange(20_000) * 2)
    index.forget(keys, np.arange(0, 20_000, 3))
    index.forget(keys, np.arange(1, 20_000, 3))  # past half deleted: compacted
    assert len(index) < 20_000
    expected = np.where(np.arange(20_000) % 3 == 2, np.arange(20_000) * 2, -1)
    assert index.lookup(keys, np.arange(20_000)).tolist() == expected.tolist()
    assert index.nbytes <= 32 * index.live


def test_colliding_keys_take_position_and_equality_deletes_like_distinct_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer with 1-bit fingerprints writes exactly the files of a 64-bit one."""
    catalog = load_catalog("k", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
    kinds = ["+I", "+I", "+I", "+I", "-D", "+U", "-D", "+I"]
    names = ["a", "b", "c", "d", "b", "c", "zz", "b"]
    batch = pa.table({"_row_kind": kinds, "id": list(range(8)), "data": names})
    later = pa.table({"_row_kind": ["-D", "+U", "-D"], "id": [9, 9, 9], "data": ["a", "d", "q"]})
    outcomes = []
    for bits in (64, 1):
        monkeypatch.setattr(BaseDeltaWriter, "key_hash_bits", bits)
        table = catalog.create_table(f"db.t{bits}", schema=schema)
        factory = TaskWriterFactory.for_table(table, equality_fields=["data"], upsert=True)
        writer = factory.create(0, 0)
        writer.write(batch.cast(pa.schema([pa.field("_row_kind", pa.string()), *schema])))
        writer.write(later.cast(pa.schema([pa.field("_row_kind", pa.string()), *schema])))
        result = writer.complete()
        outcomes.append(
            sorted(
                (f.content.name, _rows(f.file_path))
                for f in (*result.data_files, *result.delete_files)
            )
        )
    assert outcomes[0] == outcomes[1]
    # position deletes: b and c (batch 1), a and d (batch 2), by data file row
    assert ("POSITION_DELETES", [0, 1, 2, 3]) in outcomes[1]
    # equality deletes: each key's first insert, zz, b re-inserted after its delete, q
    assert ("EQUALITY_DELETES", ["a", "b", "c", "d", "zz", "b", "q"]) in outcomes[1]


def _rows(path: str) -> list[object]:
    """A file's rows without file paths (each table writes its own)."""
    rows = pq.read_table(path)
    if "pos" in rows.column_names:
        return sorted(rows.column("pos").to_pylist())
    if rows.num_columns == 1:
        return rows.column(0).to_pylist()
    return rows.to_pylist()
