"""Copy-on-write MERGE: net changes per key, touched files from statistics, rewrites."""

from __future__ import annotations

import pyarrow as pa
import pytest
from delta_readers import delta_rs_rows

from stream_sink.delta import DeltaTable
from stream_sink.delta.merge import copy_on_write, net_changes, touched_files
from stream_sink.delta.stats import may_contain
from stream_sink.exceptions import NullKeyError, UnknownRowKindError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def changes(rows: list[tuple[str, int, str, int]]) -> pa.Table:
    return pa.table(
        {
            "k": [r[0] for r in rows],
            "id": [r[1] for r in rows],
            "v": [r[2] for r in rows],
            "seq": [r[3] for r in rows],
        }
    )


def test_net_changes_keep_the_last_change_per_key_in_source_order() -> None:
    batch = changes([("+I", 1, "a", 3), ("+U", 1, "b", 1), ("-D", 2, "x", 2), ("+I", 3, "c", 4)])
    final, touched = net_changes(batch, ["id"], "changelog", "k", order_by=["seq"])
    assert sorted(final.select(["id", "v"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"},
        {"id": 3, "v": "c"},
    ]
    assert sorted(touched.column("id").to_pylist()) == [1, 2, 3]


def test_update_before_deletes_in_changelog_mode_and_is_ignored_in_upsert_mode() -> None:
    batch = changes([("+I", 1, "a", 1), ("-U", 1, "a", 2)])
    final, _ = net_changes(batch, ["id"], "changelog", "k", ["seq"])
    assert final.num_rows == 0
    final, _ = net_changes(batch, ["id"], "upsert", "k", ["seq"])
    assert final.select(["id", "v"]).to_pylist() == [{"id": 1, "v": "a"}]


def test_bad_keys_and_row_kinds_are_refused() -> None:
    with pytest.raises(NullKeyError, match="id"):
        net_changes(pa.table({"id": [1, None], "v": ["a", "b"]}), ["id"], "upsert")
    with pytest.raises(UnknownRowKindError, match="k"):
        net_changes(changes([("+X", 1, "a", 1)]), ["id"], "changelog", "k")


def test_only_files_that_may_hold_a_touched_key_are_rewritten(tmp_path) -> None:
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA)
    table.append(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    table.append(pa.table({"id": [10, 20], "v": ["j", "k"]}, schema=SCHEMA))
    touched = pa.table({"id": pa.array([2], pa.int64())})
    (candidate,) = touched_files(table.snapshot, touched)  # id 10..20 is ruled out by stats
    assert 'numRecords":3' in (candidate.stats or "")
    batch = copy_on_write(
        table.snapshot,
        table.io,
        pa.table({"id": [2, 4], "v": ["B", "d"]}, schema=SCHEMA),
        ["id"],
        "upsert",
    )
    assert [r.path for r in batch.removes] == [candidate.path]
    txn = table.new_transaction().add_all(batch.adds).add_all(batch.removes)
    txn.read_files(r.path for r in batch.removes).commit("MERGE")
    assert sorted((r["id"], r["v"]) for r in delta_rs_rows(loc)) == [
        (1, "a"),
        (2, "B"),
        (3, "c"),
        (4, "d"),
        (10, "j"),
        (20, "k"),
    ]


def test_timestamp_statistics_compare_across_writers_spellings() -> None:
    stats = (
        '{"numRecords":1,"minValues":{"t":"2024-01-01 00:00:00.000"},'
        '"maxValues":{"t":"2024-01-01 00:00:00.000"}}'
    )
    assert may_contain(stats, "t", "2024-01-01T00:00:00.000", "2024-01-01T00:00:00.000")
    assert not may_contain(stats, "t", "2024-01-02T00:00:00.000", "2024-01-03T00:00:00.000")
