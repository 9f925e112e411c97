"""Touched keys spilled by tasks and streamed by the commit (no Spark): the streamed
copy-on-write gives exactly what the in-memory one gives, on tables with and without
deletion vectors, over several spills and chunks; keys shared by two spills are found,
whatever the hash buckets; the spill files are removed. Tables read back by delta-rs
and DuckDB."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from delta_readers import delta_rs_query_rows, duckdb_delta_rows

from stream_sink.delta import DeltaTable, key_spill
from stream_sink.delta.key_spill import remove_spills, rewrite_spilled, shared_keys, write_spill
from stream_sink.delta.merge import net_changes, rewrite_touched
from stream_sink.delta.stats import num_records
from stream_sink.delta.writer import conform, write_data_files
from stream_sink.io.fileio import FileIO

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])


def hashes(keys: pa.Table) -> np.ndarray:
    frame = keys.to_pandas()
    return pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=np.uint64)


def make_table(root: Path, name: str, *, dv: bool, partitioned: bool) -> DeltaTable:
    config = {"delta.enableDeletionVectors": "true"} if dv else {}
    table = DeltaTable.create(
        str(root / name),
        SCHEMA,
        partition_by=["p"] if partitioned else (),
        configuration=config,
    )
    every = list(range(5000))
    random.Random(1).shuffle(every)
    for b in range(6):  # six files of overlapping key ranges, one row per key
        ids = every[b * 800 : (b + 1) * 800]
        table.append(
            pa.table(
                {"id": ids, "p": [f"p{i % 3}" for i in ids], "v": [b] * len(ids)}, schema=SCHEMA
            )
        )
    return table.refresh()


def apply(table: DeltaTable, removed_and_added: object, final: pa.Table) -> None:
    batch = removed_and_added
    adds = write_data_files(
        table.location,
        conform(final, table.schema),
        table.schema,
        table.partition_columns,
        io=table.io,
    )
    txn = table.new_transaction().add_all([*batch.adds, *adds]).add_all(batch.removes)  # type: ignore[attr-defined]
    txn.read_files(r.path for r in batch.removes).commit("MERGE")  # type: ignore[attr-defined]


def changes(rng: random.Random, n: int) -> pa.Table:
    kinds = [rng.choice(["+I", "+U", "-D", "+U"]) for _ in range(n)]
    ids = [rng.randrange(6000) for _ in range(n)]  # repeats within the batch
    return pa.table(
        {
            "op": kinds,
            "id": pa.array(ids, pa.int64()),
            "p": [f"p{i % 3}" for i in ids],
            "v": pa.array(range(100, 100 + n), pa.int64()),
            "seq": pa.array(range(n), pa.int64()),
        }
    )


def rows(location: str) -> list[tuple[int, str, int]]:
    return sorted((r["id"], r["p"], r["v"]) for r in delta_rs_query_rows(location))


@pytest.mark.parametrize("dv", [False, True], ids=["rewrite", "deletion-vectors"])
@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "by-p"])
def test_streamed_merge_equals_the_in_memory_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dv: bool, partitioned: bool
) -> None:
    monkeypatch.setattr(key_spill, "CHUNK_ROWS", 97)  # many chunks per spill
    a = make_table(tmp_path, "a", dv=dv, partitioned=partitioned)
    b = make_table(tmp_path, "b", dv=dv, partitioned=partitioned)
    spill_io = FileIO.for_location(str(tmp_path / "spill"))
    rng = random.Random(7)
    for _ in range(3):
        final, touched = net_changes(changes(rng, 1500), ["id"], "changelog", "op", ["seq"])
        final = final.drop_columns(["seq"])
        apply(a, rewrite_touched(a.snapshot, a.io, touched, ["id"]), final)
        # the keys split over four tasks by hash, as Spark's repartition does
        task_of = hashes(touched) % np.uint64(4)
        spills = [
            write_spill(
                spill_io,
                str(tmp_path / "spill"),
                touched.filter(pa.array(task_of == t)),
                hashes(touched)[task_of == t],
                b.partition_columns,
            )
            for t in range(4)
        ]
        assert shared_keys(spill_io, spills, chunk=50) == 0
        batch = rewrite_spilled(b.snapshot, b.io, spill_io, spills, ["id"], memory_keys=0)
        apply(b, batch, final)
        remove_spills(spill_io, spills)
        a, b = a.refresh(), b.refresh()
        assert rows(b.location) == rows(a.location)
    assert not list((tmp_path / "spill").iterdir())
    assert sorted((r["id"], r["p"], r["v"]) for r in duckdb_delta_rows(b.location)) == rows(
        a.location
    )
    ids = [r[0] for r in rows(b.location)]
    assert len(ids) == len(set(ids))


def test_keys_in_two_spills_are_counted(tmp_path: Path) -> None:
    io = FileIO.for_location(str(tmp_path))
    first = pa.table({"id": pa.array(range(0, 3000), pa.int64())})
    second = pa.table({"id": pa.array(range(2990, 6000), pa.int64())})
    spills = [write_spill(io, str(tmp_path), t, hashes(t)) for t in (first, second)]
    assert shared_keys(io, spills) == 10
    assert shared_keys(io, spills, chunk=1) == 10  # one bucket at a time
    assert shared_keys(io, spills[:1]) == 0


def test_in_memory_below_the_limit_gives_the_same_files(tmp_path: Path) -> None:
    table = make_table(tmp_path, "t", dv=False, partitioned=False)
    io = FileIO.for_location(str(tmp_path / "spill"))
    touched = pa.table({"id": pa.array([5, 17, 4000], pa.int64())})
    spill = write_spill(io, str(tmp_path / "spill"), touched, hashes(touched))
    held = rewrite_spilled(table.snapshot, table.io, io, [spill], ["id"], memory_keys=10)
    streamed = rewrite_spilled(table.snapshot, table.io, io, [spill], ["id"], memory_keys=0)
    assert sorted(r.path for r in held.removes) == sorted(r.path for r in streamed.removes)
    assert sum(num_records(a.stats) for a in held.adds) == sum(
        num_records(a.stats) for a in streamed.adds
    )
