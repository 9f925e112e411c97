"""Delta tables on S3 (SeaweedFS, the real server of ``s3_props``, behind a forwarding
proxy for the faults it does not show): commits are conditional PUTs
(``If-None-Match: *``), so two writers racing for a version on an object store behave
as on a local filesystem: exactly one wins, the other rebases after the conflict checks.
Every table is read back by delta-rs and DuckDB's delta extension over S3."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pytest
from delta_readers import by_key, delta_rs_rows, delta_rs_storage_options, duckdb_delta_rows
from s3_proxies import store_ignoring_if_none_match, store_with_conflicts

from stream_sink.commit import FilesCommitter, StateDirectory
from stream_sink.commit.delta.target import DeltaTarget, app_id
from stream_sink.delta import CommitInfo, DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.log import DeltaLog
from stream_sink.delta.merge import copy_on_write
from stream_sink.delta.writer import write_data_files
from stream_sink.exceptions import (
    ConcurrentDeleteReadError,
    InvalidOptionError,
    UnsupportedError,
)
from stream_sink.io.fileio import FileIO

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])


def rows(ids: list[int], p: str = "a") -> pa.Table:
    return pa.table({"id": ids, "p": [p] * len(ids)}, schema=SCHEMA)


@pytest.fixture
def s3_loc(s3_props: dict[str, str]) -> str:
    return f"s3://lake/delta/{uuid.uuid4().hex}"


def pairs(table_rows: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return sorted((r["id"], r["p"]) for r in table_rows)


def committer(table: DeltaTable, mode: str, state: Any) -> FilesCommitter:
    c = FilesCommitter(
        DeltaTarget(table),
        StateDirectory(str(state), kind="memory", sync=False),
        None,
        job_id="q",
        operator_id="s3",
        mode=mode,
    )
    c.restore()
    return c


def commit_batch(c: FilesCommitter, batch_id: int, batch: DeltaBatch) -> None:
    c.process(batch_id, batch)
    c.snapshot_state(batch_id)
    c.notify_checkpoint_complete(batch_id)


def test_create_append_overwrite_and_upsert_commit_on_s3_and_read_back_exactly(
    s3_loc: str, s3_props: dict[str, str], tmp_path: Any
) -> None:
    table = DeltaTable.create(
        s3_loc,
        SCHEMA,
        partition_by=["p"],
        configuration={"delta.checkpointInterval": "2"},
        storage_options=s3_props,
    )
    io = table.io
    append = committer(table, "append", tmp_path / "append")
    commit_batch(
        append, 0, DeltaBatch(tuple(write_data_files(s3_loc, rows([1, 2]), SCHEMA, ["p"], io=io)))
    )
    commit_batch(
        append, 1, DeltaBatch(tuple(write_data_files(s3_loc, rows([3], "b"), SCHEMA, ["p"], io=io)))
    )
    append.close()
    overwrite = committer(table.refresh(), "overwrite", tmp_path / "overwrite")
    commit_batch(
        overwrite,
        2,
        DeltaBatch(tuple(write_data_files(s3_loc, rows([5, 6]), SCHEMA, ["p"], io=io))),
    )
    overwrite.close()
    upsert = committer(table.refresh(), "append", tmp_path / "upsert")
    changes = pa.table({"id": [6, 7, 3], "p": ["a", "c", "b"], "op": ["+U", "+I", "-D"]})
    merged = copy_on_write(table.refresh().snapshot, io, changes, ["id"], "upsert", "op")
    commit_batch(upsert, 3, merged)
    upsert.close()

    want = [(5, "a"), (6, "a"), (7, "c")]
    loaded = DeltaTable.load(s3_loc, storage_options=s3_props)
    assert loaded.version == 4
    assert loaded.log.list_checkpoints() == [2, 4]  # written and read through FileIO
    assert loaded.log.read_last_checkpoint() == {"version": 4, "size": 9, "numOfAddFiles": 3}
    assert pairs(loaded.to_arrow().to_pylist()) == want
    assert pairs(loaded.to_arrow(version=2).to_pylist()) == [(1, "a"), (2, "a"), (3, "b")]
    assert pairs(delta_rs_rows(s3_loc, s3=s3_props)) == want
    assert pairs(duckdb_delta_rows(s3_loc, s3=s3_props)) == want
    assert pairs(duckdb_delta_rows(s3_loc, 3, s3=s3_props)) == [(3, "b"), (5, "a"), (6, "a")]
    assert loaded.snapshot.txn_version(app_id("q", "s3")) == 3


def test_two_writers_racing_for_one_version_on_s3_one_wins_the_other_rebases(
    s3_loc: str, s3_props: dict[str, str]
) -> None:
    DeltaTable.create(s3_loc, SCHEMA, storage_options=s3_props).append(rows([1]))
    mine = DeltaTable.load(s3_loc, storage_options=s3_props)
    txn = mine.new_transaction().add_all(
        write_data_files(s3_loc, rows([10]), SCHEMA, (), io=mine.io)
    )
    assert DeltaTable.load(s3_loc, storage_options=s3_props).append(rows([20])) == 2
    assert txn.commit() == 3  # version 2 answered 412; the append passed the checks
    info = DeltaLog(s3_loc, storage_options=s3_props).read_commit(3)[0]
    assert isinstance(info, CommitInfo) and info.values["operationMetrics"]["numAttempts"] == "2"

    # a writer whose read file was removed by the winner is refused, the table unchanged
    reader = DeltaTable.load(s3_loc, storage_options=s3_props)
    stale = reader.new_transaction().read_files(reader.snapshot.files)
    stale.add_all(write_data_files(s3_loc, rows([30]), SCHEMA, (), io=reader.io))
    winner = DeltaTable.load(s3_loc, storage_options=s3_props)
    now = int(time.time() * 1000)
    winner.new_transaction().add_all(a.remove(now) for a in winner.snapshot.files.values()).commit(
        "DELETE"
    )
    with pytest.raises(ConcurrentDeleteReadError):
        stale.commit()
    assert DeltaTable.load(s3_loc, storage_options=s3_props).version == 4
    assert delta_rs_rows(s3_loc, s3=s3_props) == []


def test_concurrent_writers_on_s3_each_win_a_distinct_version(
    s3_loc: str, s3_props: dict[str, str]
) -> None:
    DeltaTable.create(s3_loc, SCHEMA, storage_options=s3_props)
    barrier = threading.Barrier(4)
    versions: list[int] = []
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            table = DeltaTable.load(s3_loc, storage_options=s3_props)
            adds = write_data_files(s3_loc, rows([i]), SCHEMA, (), io=table.io)
            txn = table.new_transaction().add_all(adds)
            barrier.wait(timeout=30)
            versions.append(txn.commit())
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert sorted(versions) == [1, 2, 3, 4]
    assert sorted(r["id"] for r in delta_rs_rows(s3_loc, s3=s3_props)) == [0, 1, 2, 3]


def _same_app_racer(
    loc: str, s3: Mapping[str, str], state: str, barrier: threading.Barrier, errors: list
) -> None:
    try:
        table = DeltaTable.load(loc, storage_options=s3)
        c = committer(table, "append", state)
        for b in range(3):
            adds = write_data_files(loc, rows([b]), SCHEMA, (), io=table.io)
            c.process(b, DeltaBatch(tuple(adds)))
            c.snapshot_state(b)
            barrier.wait(timeout=60)
            c.notify_checkpoint_complete(b)
        c.close()
    except BaseException as e:  # reported by the test
        errors.append(e)
        barrier.abort()


def test_two_sinks_with_the_same_app_id_racing_on_s3_commit_each_batch_once(
    s3_loc: str, s3_props: dict[str, str], tmp_path: Any
) -> None:
    DeltaTable.create(s3_loc, SCHEMA, storage_options=s3_props)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    threads = [
        threading.Thread(
            target=_same_app_racer,
            args=(s3_loc, s3_props, str(tmp_path / f"s{i}"), barrier, errors),
        )
        for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sorted(r["id"] for r in delta_rs_rows(s3_loc, s3=s3_props)) == [0, 1, 2]
    table = DeltaTable.load(s3_loc, storage_options=s3_props)
    marks = [
        table.snapshot_at(v).txn_version(app_id("q", "s3")) for v in range(1, table.version + 1)
    ]
    assert marks == [0, 1, 2], f"a batch was committed twice or lost: {marks}"
    data = FileIO.for_location(s3_loc, s3_props).list_dir(s3_loc)
    assert len([d for d in data if d.endswith(".parquet")]) == 3, "the loser's files remain"


def test_a_delta_rs_table_on_s3_is_appended_to_by_us_and_read_back_by_delta_rs(
    s3_loc: str, s3_props: dict[str, str]
) -> None:
    from deltalake import write_deltalake

    options = {**delta_rs_storage_options(s3_props), "conditional_put": "etag"}
    write_deltalake(s3_loc, rows([1, 2]), partition_by=["p"], storage_options=options)
    table = DeltaTable.load(s3_loc, storage_options=s3_props)
    assert table.append(rows([3], "b")) == 1
    write_deltalake(s3_loc, rows([4], "c"), mode="append", storage_options=options)
    want = [(1, "a"), (2, "a"), (3, "b"), (4, "c")]
    assert pairs(delta_rs_rows(s3_loc, s3=s3_props)) == want
    assert pairs(table.refresh().to_arrow().to_pylist()) == want
    assert by_key(table.to_arrow(version=1).to_pylist(), "id")[-1] == {"id": 3, "p": "b"}


@pytest.mark.parametrize("location", ["gs://bucket/t", "abfs://c@acct.dfs.core.windows.net/t"])
def test_stores_without_put_if_absent_here_are_refused_saying_why(location: str) -> None:
    with pytest.raises(InvalidOptionError, match="put-if-absent") as e:
        DeltaTable.create(location, SCHEMA)
    assert "s3://" in str(e.value) and "only one wins a version" in str(e.value)
    with pytest.raises(InvalidOptionError, match="put-if-absent"):
        DeltaLog("hdfs://namenode/t").write_commit(0, [])


def test_storage_options_that_are_not_fileio_properties_are_refused(s3_loc: str) -> None:
    with pytest.raises(InvalidOptionError, match=r"AWS_ENDPOINT_URL.*s3\.endpoint"):
        DeltaTable.load(s3_loc, storage_options={"AWS_ENDPOINT_URL": "http://x"})


def test_a_store_that_ignores_conditional_writes_is_refused_before_any_version(
    s3_props: dict[str, str],
) -> None:
    loc = f"s3://lake/delta/{uuid.uuid4().hex}"
    with store_ignoring_if_none_match(s3_props) as endpoint:
        props = {**s3_props, "s3.endpoint": endpoint}
        with pytest.raises(UnsupportedError, match="does not honour conditional writes"):
            DeltaTable.create(loc, SCHEMA, storage_options=props)
    assert FileIO.for_location(loc, s3_props).list_dir(f"{loc}/_delta_log") == []


def test_a_409_conditional_conflict_rereads_and_retries_the_same_version(
    s3_props: dict[str, str],
) -> None:
    loc = f"s3://lake/delta/{uuid.uuid4().hex}"
    table = DeltaTable.create(loc, SCHEMA, storage_options=s3_props)
    with store_with_conflicts(s3_props, 2) as (endpoint, answered):
        props = {**s3_props, "s3.endpoint": endpoint}
        mine = DeltaTable.load(loc, storage_options=props)
        adds = write_data_files(loc, rows([1]), SCHEMA, (), io=table.io)  # straight to S3
        assert mine.new_transaction().add_all(adds).commit() == 1  # 409, 409, created
    assert [p.split("?")[0].rsplit("/", 1)[-1] for p in answered] == [
        "00000000000000000001.json"
    ] * 2
    info = table.refresh().log.read_commit(1)[0]
    assert isinstance(info, CommitInfo) and info.values["operationMetrics"]["numAttempts"] == "1"
    assert delta_rs_rows(loc, s3=s3_props) == [{"id": 1, "p": "a"}]
