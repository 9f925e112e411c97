"""Delete application: sequence-number rules, partition scoping, nulls, caching.

Data files come from our writers, delete files are written by hand (read_support),
and every table is also read by DuckDB's iceberg extension at each snapshot.

Tests stream_sink.read.task_reader: a task's rows minus its deleted rows.
Tests stream_sink.table.delete_index: which delete files apply to which data file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from read_support import (
    CountingIO,
    assert_same_as_duckdb,
    equality_deletes,
    hadoop_catalog,
    position_deletes,
    row_delta,
    rows_of,
    write_data,
)

from stream_sink.exceptions import MissingFileError
from stream_sink.read import TableScan
from stream_sink.read.deletes import EqualityKeys
from stream_sink.table.partitioning import build_partition_spec

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("k", pa.string()),
        pa.field("v", pa.int32()),
    ]
)


def _rows(*rows: tuple) -> pa.Table:
    return pa.table(
        {
            "id": [r[0] for r in rows],
            "k": [r[1] for r in rows],
            "v": pa.array([r[2] for r in rows], pa.int32()),
        },
        schema=SCHEMA,
    )


def _ids(table, **scan) -> list[tuple]:
    return [(r["id"], r["k"], r["v"]) for r in rows_of(table.scan(**scan).to_arrow(), "id")]


@pytest.fixture
def catalog(tmp_path: Path):
    return hadoop_catalog(tmp_path)


def test_equality_delete_skips_same_sequence_data_and_hits_older(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    row_delta(t, write_data(t, _rows((1, "a", 1), (2, "a", 2), (3, "b", 3))))
    # one commit: a new version of id 2 plus an equality delete of id 2
    newer = write_data(t, _rows((2, "a", 20)))
    row_delta(t, newer, [equality_deletes(t, pa.table({"id": [2]}))])
    assert _ids(t) == [(1, "a", 1), (2, "a", 20), (3, "b", 3)]
    # a later delete of id 2 removes the newer row too
    row_delta(t, deletes=[equality_deletes(t, pa.table({"id": [2]}))])
    assert _ids(t) == [(1, "a", 1), (3, "b", 3)]
    assert t.scan().count() == 2
    assert_same_as_duckdb(t, "id")


def test_position_delete_applies_to_same_sequence_and_older_data(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    (old,) = write_data(t, _rows((1, "a", 1), (2, "a", 2), (3, "a", 3)))
    row_delta(t, [old])
    (new,) = write_data(t, _rows((4, "b", 4), (5, "b", 5)))
    # same commit: delete row 0 of the new file and row 2 of the old one
    pos = position_deletes(t, [(new.file_path, 0), (old.file_path, 2)])
    row_delta(t, [new], [pos])
    assert _ids(t) == [(1, "a", 1), (2, "a", 2), (5, "b", 5)]
    assert t.scan().count() == 3
    assert_same_as_duckdb(t, "id")


def test_position_deletes_by_path_do_not_touch_other_files(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    (a,) = write_data(t, _rows((1, "a", 1), (2, "a", 2)))
    (b,) = write_data(t, _rows((3, "b", 3), (4, "b", 4)))
    row_delta(t, [a, b])
    row_delta(t, deletes=[position_deletes(t, [(a.file_path, 1)])])
    tasks = {task.data_file.file_path: task for task in TableScan(t).plan_files()}
    assert len(tasks[a.file_path].delete_files) == 1
    assert tasks[b.file_path].delete_files == []
    assert _ids(t) == [(1, "a", 1), (3, "b", 3), (4, "b", 4)]


def test_equality_deletes_are_partition_scoped(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA, partition_spec=[("identity", "k")])
    row_delta(t, write_data(t, _rows((1, "a", 1), (1, "b", 2), (2, "a", 3), (2, "b", 4))))
    row_delta(t, deletes=[equality_deletes(t, pa.table({"id": [1]}), partition=("a",))])
    assert _ids(t) == [(1, "b", 2), (2, "a", 3), (2, "b", 4)]
    # not compared with DuckDB 1.5.5: it applies partition-scoped equality deletes to
    # every partition of the spec (duckdb/duckdb-iceberg#1240, fixed after that release)


def test_unpartitioned_equality_deletes_apply_to_every_partition(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    schema = t.schema()
    evolved = t.metadata.with_spec(build_partition_spec(schema, [("identity", "k")]))
    t.catalog.commit(t.identifier, t.metadata_location, evolved)
    t.refresh()
    assert t.spec().spec_id == 1
    row_delta(t, write_data(t, _rows((1, "a", 1), (1, "b", 2), (2, "a", 3))))
    row_delta(t, deletes=[equality_deletes(t, pa.table({"id": [1]}), spec_id=0)])
    assert _ids(t) == [(2, "a", 3)]
    assert_same_as_duckdb(t, "id")


def test_nulls_equal_nulls_single_key(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    row_delta(t, write_data(t, _rows((1, None, 1), (2, "x", 2), (3, None, 3), (4, "y", 4))))
    row_delta(t, deletes=[equality_deletes(t, pa.table({"k": pa.array([None, "y"], pa.string())}))])
    assert _ids(t) == [(2, "x", 2)]
    assert_same_as_duckdb(t, "id")


def test_nulls_equal_nulls_composite_key(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    rows = _rows((1, None, 1), (1, "a", 2), (2, None, 3), (2, "a", 4))
    row_delta(t, write_data(t, rows))
    keys = pa.table({"id": [1, 2], "k": pa.array([None, "a"], pa.string())})
    row_delta(t, deletes=[equality_deletes(t, keys)])
    assert _ids(t) == [(1, "a", 2), (2, None, 3)]
    # not compared with DuckDB 1.5.5: it drops (2, null) for the delete key (2, 'a'),
    # negating the key match in SQL logic where null != 'a' is not true (the bug
    # apache/iceberg-rust#2780 describes); the spec keeps the row


def test_several_equality_id_sets_and_position_deletes_together(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    (f,) = write_data(t, _rows(*((i, "ab"[i % 2], i) for i in range(10))))
    row_delta(t, [f])
    row_delta(
        t,
        deletes=[
            equality_deletes(t, pa.table({"id": [0, 1]})),
            equality_deletes(t, pa.table({"v": pa.array([9], pa.int32())})),
            position_deletes(t, [(f.file_path, 4)]),
        ],
    )
    assert [r[0] for r in _ids(t)] == [2, 3, 5, 6, 7, 8]
    assert [r[0] for r in _ids(t, row_filter="k = 'a'", columns=["id", "k", "v"])] == [2, 6, 8]
    assert t.scan(row_filter="k = 'a'").count() == 3
    assert_same_as_duckdb(t, "id")


def test_delete_files_are_read_once_per_scan(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    row_delta(t, write_data(t, _rows((1, "a", 1), (2, "a", 2))))
    row_delta(t, write_data(t, _rows((3, "a", 3), (4, "a", 4))))
    eq = equality_deletes(t, pa.table({"id": [1, 3]}))
    row_delta(t, deletes=[eq])
    t.io = CountingIO()
    assert [r[0] for r in _ids(t)] == [2, 4]
    assert t.io.opened.count(eq.file_path) == 1
    assert len(t.io.opened) == 3


def test_missing_delete_file_names_file_and_table(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    row_delta(t, write_data(t, _rows((1, "a", 1))))
    eq = equality_deletes(t, pa.table({"id": [1]}))
    row_delta(t, deletes=[eq])
    os.remove(eq.file_path)
    with pytest.raises(MissingFileError) as err:
        t.scan().to_arrow()
    assert eq.file_path in str(err.value) and "delete file" in str(err.value)
    assert "db.t" in str(err.value)


def test_nulls_equal_nulls_integer_key(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    row_delta(t, write_data(t, _rows((1, "a", None), (2, "b", 9), (3, "c", 4), (4, "d", None))))
    row_delta(t, deletes=[equality_deletes(t, pa.table({"v": pa.array([None, 9], pa.int32())}))])
    assert _ids(t) == [(3, "c", 4)]
    assert_same_as_duckdb(t, "id")
    row_delta(t, write_data(t, _rows((5, "e", None))))
    row_delta(t, deletes=[equality_deletes(t, pa.table({"v": pa.array([4], pa.int32())}))])
    # a delete without nulls keeps null rows (DuckDB 1.5.5 drops them: not compared)
    assert _ids(t) == [(5, "e", None)]


def test_equality_deletes_skip_data_files_with_disjoint_keys(catalog) -> None:
    t = catalog.create_table("db.t", schema=SCHEMA)
    (low,) = write_data(t, _rows(*((i, "a", i) for i in range(10))))
    (high,) = write_data(t, _rows(*((i, "b", i) for i in range(100, 110))))
    row_delta(t, [low, high])
    row_delta(t, deletes=[equality_deletes(t, pa.table({"id": [105, 106]}))])
    tasks = {task.data_file.file_path: task for task in TableScan(t).plan_files()}
    assert tasks[low.file_path].delete_files == []
    assert len(tasks[high.file_path].delete_files) == 1
    assert [r[0] for r in _ids(t)] == [*range(10), *range(100, 105), *range(107, 110)]
    # a null key may match rows anywhere: no skipping then
    row_delta(
        t, deletes=[equality_deletes(t, pa.table({"k": pa.array([None, "zzz"], pa.string())}))]
    )
    assert all(len(task.delete_files) >= 1 for task in TableScan(t).plan_files())


@pytest.mark.parametrize(
    "keys",
    [
        [5, 7, 9, 1_000],  # dense: looked up in a bitmap
        [-(2**63), 0, 2**63 - 1],  # the widest range: binary search
        [2**63 - 3, 2**63 - 1],  # dense at the top of the range
    ],
)
def test_integer_keys_mark_exactly_the_deleted_rows(keys: list[int]) -> None:
    deleted = EqualityKeys.of((1,), [pa.chunked_array([pa.array([*keys, None], pa.int64())])])
    rows = [-(2**63), -1, 0, 4, 5, 6, 7, 9, 10, 999, 1_000, 1_001, 2**63 - 3, 2**63 - 1, None]
    got = deleted.deleted([pa.array(rows, pa.int64())]).tolist()
    assert got == [r is None or r in keys for r in rows]
