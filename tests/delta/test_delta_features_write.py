"""Writing into tables with the features Delta writers turn on by default: appends under
column mapping (physical names, field ids), the copy-on-write MERGE keeping rows a
deletion vector deletes deleted and writing deletion vectors itself, and the conflict
rules for deletion vectors. Every result is read by delta-rs and DuckDB too.

Tests stream_sink.delta.column_mapping: physical names and field ids under column mapping."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_readers import by_key, delta_rs_query_rows, duckdb_delta_rows
from delta_tables import delta_rs_table_with_dvs_and_mapping
from delta_tables import upsert_into as _upsert

from stream_sink.delta import DeltaTable
from stream_sink.delta.merge import copy_on_write
from stream_sink.delta.paths import absolute_location
from stream_sink.exceptions import ConcurrentDeleteDeleteError, ConcurrentDeleteReadError


def _all_readers(loc: str) -> list[dict]:
    ours = by_key(DeltaTable.load(loc).to_arrow().to_pylist(), "id")
    assert by_key(delta_rs_query_rows(loc), "id") == ours
    assert by_key(duckdb_delta_rows(loc), "id") == ours
    return ours


def test_append_and_upsert_into_a_table_with_deletion_vectors_and_column_mapping(tmp_path):
    loc = str(tmp_path / "t")
    delta_rs_table_with_dvs_and_mapping(loc)
    before = _all_readers(loc)
    assert [r["id"] for r in before] == [i for i in range(200) if i not in (2, 5)]
    assert set(before[0]) == {"id", "value"}

    table = DeltaTable.load(loc)
    table.append(pa.table({"id": pa.array([200, 201], pa.int64()), "value": ["n", "n"]}))
    (new,) = [a for a in table.snapshot.files.values() if "201" in (a.stats or "")]
    written = pq.read_schema(absolute_location(loc, new.path))
    assert written.names == ["id", "v"]  # physical names
    assert written.field("v").metadata[b"PARQUET:field_id"] == b"2"

    # 3 and 4 live in the first file (which has a deletion vector), 2 was deleted by it,
    # 150 lives in the second; 300 is new
    upsert = pa.table(
        {
            "id": pa.array([2, 3, 4, 150, 300], pa.int64()),
            "value": ["u2", "u3", "u4", "u150", "u300"],
        }
    )
    _upsert(table, upsert)
    after = _all_readers(loc)
    want = {r["id"]: r["value"] for r in before}
    want.update({200: "n", 201: "n", 2: "u2", 3: "u3", 4: "u4", 150: "u150", 300: "u300"})
    assert {r["id"]: r["value"] for r in after} == want
    assert 5 not in {r["id"] for r in after}  # still deleted by the first vector

    dvs = {a.path: a.deletion_vector for a in DeltaTable.load(loc).snapshot.files.values()}
    assert sum(1 for dv in dvs.values() if dv is not None) == 2  # both old files, no rewrite
    first = next(dv for dv in dvs.values() if dv and dv["cardinality"] == 4)
    assert first["storageType"] == "u"  # ids 2, 5 (old vector) and 3, 4 (new rows)


def test_a_file_losing_most_rows_is_rewritten_not_given_a_deletion_vector(tmp_path):
    loc = str(tmp_path / "t")
    delta_rs_table_with_dvs_and_mapping(loc)
    table = DeltaTable.load(loc)
    (second,) = [p for p, a in table.snapshot.files.items() if a.deletion_vector is None]
    ids = list(range(100, 130))  # 30% of the second file
    _upsert(table, pa.table({"id": pa.array(ids, pa.int64()), "value": ["x"] * 30}))
    live = DeltaTable.load(loc).snapshot.files
    assert second not in live  # rewritten: a vector would delete more than 20% of it
    assert sum(1 for a in live.values() if a.deletion_vector is not None) == 1
    got = {r["id"]: r["value"] for r in _all_readers(loc) if r["id"] >= 100}
    assert got == {i: "x" if i in ids else "b" for i in range(100, 200)}


def test_tables_without_deletion_vectors_enabled_get_rewrites(tmp_path):
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, pa.schema([("id", pa.int64()), ("value", pa.string())]))
    table.append(pa.table({"id": pa.array(range(10), pa.int64()), "value": ["a"] * 10}))
    _upsert(table, pa.table({"id": pa.array([1], pa.int64()), "value": ["b"]}))
    assert all(a.deletion_vector is None for a in table.snapshot.files.values())
    assert len(_all_readers(loc)) == 10


def test_concurrent_deletion_vectors_on_one_file_conflict(tmp_path):
    """Two MERGEs planned on the same version both put a new deletion vector on the
    first file: the second one's remove names the vector the first replaced, so it is
    refused (PROTOCOL.md: a logical file is (path, deletion vector))."""
    loc = str(tmp_path / "t")
    delta_rs_table_with_dvs_and_mapping(loc)
    one, two = DeltaTable.load(loc), DeltaTable.load(loc)
    a = copy_on_write(one.snapshot, one.io, pa.table({"id": [3], "value": ["x"]}), ["id"], "upsert")
    b = copy_on_write(two.snapshot, two.io, pa.table({"id": [4], "value": ["y"]}), ["id"], "upsert")
    one.new_transaction().add_all(a.adds).add_all(a.removes).read_files(
        r.path for r in a.removes
    ).commit("MERGE")
    txn = two.new_transaction().add_all(b.adds).add_all(b.removes)
    txn.read_files(r.path for r in b.removes)
    with pytest.raises((ConcurrentDeleteReadError, ConcurrentDeleteDeleteError)):
        txn.commit("MERGE")
    ids = {r["id"]: r["value"] for r in _all_readers(loc)}
    assert ids[3] == "x" and ids[4] == "a4"


@pytest.mark.parametrize("mode", ["name", "id"])
def test_tables_we_create_with_column_mapping_and_deletion_vectors(tmp_path, mode):
    loc = str(tmp_path / mode)
    schema = pa.schema(
        [("id", pa.int64()), ("value", pa.string()), ("s", pa.struct([("x", pa.int32())]))]
    )
    config = {"delta.columnMapping.mode": mode, "delta.enableDeletionVectors": "true"}
    table = DeltaTable.create(loc, schema, configuration=config)
    assert set(table.snapshot.protocol.reader_features or ()) == {
        "columnMapping",
        "deletionVectors",
    }
    rows = pa.table(
        {
            "id": pa.array(range(10), pa.int64()),
            "value": ["a"] * 10,
            "s": pa.array([{"x": i} for i in range(10)], schema.field("s").type),
        }
    )
    table.append(rows)
    (add,) = table.snapshot.files.values()
    names = pq.read_schema(absolute_location(loc, add.path)).names
    assert all(n.startswith("col-") for n in names)
    change = pa.table(
        {"id": pa.array([4], pa.int64()), "value": ["b"], "s": rows.column("s").slice(4, 1)}
    )
    _upsert(table, change)
    assert DeltaTable.load(loc).snapshot.files[add.path].deletion_vector is not None
    got = {r["id"]: (r["value"], r["s"]["x"]) for r in _all_readers(loc)}
    assert got == {i: ("b" if i == 4 else "a", i) for i in range(10)}


def test_our_checkpoints_keep_deletion_vectors(tmp_path):
    loc = str(tmp_path / "t")
    delta_rs_table_with_dvs_and_mapping(loc)
    table = DeltaTable.load(loc)
    _upsert(table, pa.table({"id": pa.array([3], pa.int64()), "value": ["x"]}))
    from stream_sink.delta.checkpoint import write_checkpoint

    write_checkpoint(table.log, table.snapshot)
    for v in range(table.version):
        os.remove(f"{loc}/_delta_log/{v:020d}.json")
    got = _all_readers(loc)  # from the checkpoint and the last commit only
    assert {r["id"] for r in got} == {i for i in range(200) if i not in (2, 5)}


def test_partition_overwrite_under_column_mapping_replaces_only_its_partitions(tmp_path):
    from stream_sink.commit.delta.target import replace_partitions
    from stream_sink.delta.writer import write_data_files

    loc = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    config = {"delta.columnMapping.mode": "name"}
    table = DeltaTable.create(loc, schema, partition_by=["p"], configuration=config)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"]}))
    snapshot = table.snapshot
    adds = write_data_files(
        loc,
        pa.table({"id": pa.array([3], pa.int64()), "p": ["a"]}),
        table.schema,
        table.partition_columns,
        io=table.io,
        mapping=snapshot.column_mapping,
    )
    txn = table.new_transaction().add_all(adds)
    replace_partitions(txn, adds, table.partition_columns)
    txn.commit("WRITE")
    assert {(r["id"], r["p"]) for r in DeltaTable.load(loc).to_arrow().to_pylist()} == {
        (2, "b"),
        (3, "a"),
    }
    assert {(r["id"], r["p"]) for r in delta_rs_query_rows(loc)} == {(2, "b"), (3, "a")}
