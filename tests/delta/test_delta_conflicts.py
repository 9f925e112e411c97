"""Conflict checks against winning commits (Delta's OptimisticTransaction isolation
cases): each test names the case it checks.

Tests stream_sink.delta.conflicts: conflict checks against winning commits.
Tests stream_sink.delta.transaction: the optimistic transaction that runs them."""

from __future__ import annotations

import dataclasses
import threading
import time

import pyarrow as pa
import pytest
from delta_readers import delta_rs_rows

from stream_sink.delta import DeltaTable, Protocol, Txn
from stream_sink.delta.writer import write_data_files
from stream_sink.exceptions import (
    CommitValidationError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    MetadataChangedError,
    ProtocolChangedError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])


def batch(ids: list[int], p: str = "a") -> pa.Table:
    return pa.table({"id": ids, "p": [p] * len(ids)}, schema=SCHEMA)


@pytest.fixture
def loc(tmp_path):
    location = str(tmp_path / "t")
    DeltaTable.create(location, SCHEMA, partition_by=["p"]).append(batch([1, 2]))
    return location


def adds(table: DeltaTable, data: pa.Table):
    return write_data_files(table.location, data, table.schema, table.partition_columns)


def rewrite_txn(table: DeltaTable):
    """A transaction that reads and rewrites every file (a copy-on-write delete of id 1)."""
    txn = table.new_transaction()
    now = int(time.time() * 1000)
    files = list(table.snapshot.files.values())
    txn.read_files(a.path for a in files)
    txn.add_all(a.remove(now) for a in files)
    txn.add_all(adds(table, batch([2])))
    return txn


def test_concurrent_append_against_our_append_passes(loc):
    mine = DeltaTable.load(loc)
    txn = mine.new_transaction().add_all(adds(mine, batch([10])))
    DeltaTable.load(loc).append(batch([20]))  # wins version 2
    assert txn.commit() == 3
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == [1, 2, 10, 20]


def test_concurrent_remove_of_a_file_we_read_fails(loc):
    mine = DeltaTable.load(loc)
    txn = mine.new_transaction().add_all(adds(mine, batch([3])))
    txn.read_files(mine.snapshot.files)
    rewrite_txn(DeltaTable.load(loc)).commit()  # removes the file we read
    with pytest.raises(ConcurrentDeleteReadError, match="which this transaction read"):
        txn.commit()
    assert DeltaTable.load(loc).version == 2


def test_concurrent_remove_of_a_file_we_remove_fails(loc):
    mine = DeltaTable.load(loc)
    now = int(time.time() * 1000)
    txn = mine.new_transaction().add_all(a.remove(now) for a in mine.snapshot.files.values())
    rewrite_txn(DeltaTable.load(loc)).commit()
    with pytest.raises(ConcurrentDeleteReadError):  # a rewrite reads what it removes
        rewrite_txn(mine).commit()
    with pytest.raises(ConcurrentDeleteDeleteError, match="removes too"):
        txn.commit()


def test_rewrite_planned_before_a_remove_that_committed_since_fails(loc):
    planned = list(DeltaTable.load(loc).snapshot.files.values())  # a rewrite planned on v1
    rewrite_txn(DeltaTable.load(loc)).commit()  # version 2 removes the same file
    late = DeltaTable.load(loc).new_transaction()  # committed on a fresh read of version 2
    late.add_all(a.remove(int(time.time() * 1000)) for a in planned)
    with pytest.raises(ConcurrentDeleteReadError, match="no longer live at version 2"):
        late.commit()


def test_concurrent_metadata_change_fails(loc):
    mine = DeltaTable.load(loc)
    txn = mine.new_transaction().add_all(adds(mine, batch([3])))
    other = DeltaTable.load(loc)
    meta = dataclasses.replace(other.snapshot.metadata, configuration={"delta.appendOnly": "true"})
    other.new_transaction().add(meta).commit("SET TBLPROPERTIES")
    with pytest.raises(MetadataChangedError, match="changed the table metadata"):
        txn.commit()


def test_concurrent_protocol_change_fails(loc):
    mine = DeltaTable.load(loc)
    txn = mine.new_transaction().add_all(adds(mine, batch([3])))
    DeltaTable.load(loc).new_transaction().add(Protocol(1, 2)).commit("UPGRADE PROTOCOL")
    with pytest.raises(ProtocolChangedError):
        txn.commit()


def test_concurrent_txn_of_an_app_id_we_read_fails(loc):
    mine = DeltaTable.load(loc)
    txn = mine.new_transaction().add_all(adds(mine, batch([3])))
    assert txn.read_app_id("stream-sink:job:sink") is None
    txn.add(Txn("stream-sink:job:sink", 5))
    DeltaTable.load(loc).new_transaction().add(Txn("stream-sink:job:sink", 5)).commit()
    with pytest.raises(ConcurrentTransactionError, match="stream-sink:job:sink"):
        txn.commit()


def test_txn_app_id_advanced_past_ours_is_refused_by_validation_on_the_new_version(loc):
    app = "stream-sink:job:sink"

    def watermark_below(batch_id: int):
        def check(snapshot):
            mark = snapshot.txn_version(app)
            if mark is not None and mark >= batch_id:
                raise CommitValidationError(f"{app} already at {mark}")

        return check

    mine = DeltaTable.load(loc)
    txn = mine.new_transaction().add_all(adds(mine, batch([3]))).add(Txn(app, 7))
    txn.validate(watermark_below(7))
    other = DeltaTable.load(loc)
    other.new_transaction().add(Txn(app, 8)).validate(watermark_below(8)).commit()
    with pytest.raises(CommitValidationError, match="already at 8"):
        txn.commit()
    assert DeltaTable.load(loc).snapshot.txn_version(app) == 8


def replace_partition_txn(table: DeltaTable, p: str, isolation="WriteSerializable"):
    """Dynamic partition overwrite of partition ``p``."""
    txn = table.new_transaction(isolation)
    now = int(time.time() * 1000)
    old = [a for a in table.snapshot.files.values() if a.partition_values.get("p") == p]
    txn.read_predicate(f"p = {p!r}", lambda a: a.partition_values.get("p") == p)
    txn.read_files(a.path for a in old)
    txn.add_all(a.remove(now) for a in old)
    return txn.add_all(adds(table, batch([99], p)))


def test_blind_append_into_a_partition_we_replace_passes_under_write_serializable(loc):
    txn = replace_partition_txn(DeltaTable.load(loc), "a")
    DeltaTable.load(loc).append(batch([5], "a"))
    txn.commit()
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == [5, 99]


def test_blind_append_into_a_partition_we_replace_fails_under_serializable(loc):
    txn = replace_partition_txn(DeltaTable.load(loc), "a", "Serializable")
    DeltaTable.load(loc).append(batch([5], "a"))
    with pytest.raises(ConcurrentAppendError, match="p = 'a'"):
        txn.commit()


def test_non_blind_write_into_a_partition_we_replace_fails(loc):
    txn = replace_partition_txn(DeltaTable.load(loc), "a")
    replace_partition_txn(DeltaTable.load(loc), "a").commit()
    with pytest.raises((ConcurrentAppendError, ConcurrentDeleteReadError)):
        txn.commit()


def test_write_into_another_partition_than_we_replace_passes(loc):
    txn = replace_partition_txn(DeltaTable.load(loc), "a")
    replace_partition_txn(DeltaTable.load(loc), "b").commit()
    txn.commit()
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == [99, 99]


def test_snapshot_isolation_ignores_concurrent_adds(loc):
    txn = replace_partition_txn(DeltaTable.load(loc), "a", "SnapshotIsolation")
    other = DeltaTable.load(loc)
    other.new_transaction().add_all(adds(other, batch([6], "a"))).read_files(["x"]).commit()
    txn.commit()


def test_racing_writers_each_win_a_distinct_version(loc):
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            for j in range(5):
                DeltaTable.load(loc).append(batch([100 * i + j]))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    table = DeltaTable.load(loc)
    assert table.version == 21
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == sorted(
        [1, 2] + [100 * i + j for i in range(4) for j in range(5)]
    )
