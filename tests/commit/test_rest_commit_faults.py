"""Commits to a REST catalog when the server or the network fails, through a
fault-injecting proxy in front of SeaweedFS's REST catalog: a 5xx or a dropped
connection after the server applied the commit, 409 storms, and a server that cannot be
reached. Every case ends with every row exactly once and no file the table references
deleted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fault_proxy import FaultProxy
from harness import Harness, write_rows

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import CommitFailedError, CommitStateUnknownError
from stream_sink.table.manifest import read_manifest, read_manifest_list

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
FAST_RETRIES = {"commit.retry.min-wait-ms": "5", "commit.retry.max-wait-ms": "50"}


@pytest.fixture
def proxy(seaweed: Any) -> Iterator[FaultProxy]:
    p = FaultProxy(seaweed.catalog_uri)
    yield p
    p.close()


@pytest.fixture
def table(proxy: FaultProxy, seaweed: Any, rest_catalog: Any) -> Any:
    props = {**seaweed.rest_props("warehouse"), "uri": proxy.uri, "rest.retry-max-wait-ms": "50"}
    catalog = load_catalog("proxied", type="rest", **props)
    name = f"{rest_catalog.test_namespace}.faults"
    return catalog.create_table(name, SCHEMA, properties=FAST_RETRIES)


def rows(ids: range) -> pa.Table:
    return pa.table({"id": list(ids), "data": [f"d{i}" for i in ids]}, schema=SCHEMA)


def ids(table: Any) -> list[int]:
    return sorted(table.refresh().scan().to_arrow().column("id").to_pylist())


def referenced_files_exist(table: Any) -> None:
    """Every manifest list, manifest and data file of every snapshot is in storage."""
    io = table.io
    for snap in table.refresh().snapshots():
        assert io.exists(snap.manifest_list), snap.manifest_list
        for m in read_manifest_list(io, snap.manifest_list):
            assert io.exists(m.manifest_path), m.manifest_path
            for e in read_manifest(io, m):
                assert io.exists(e.data_file.file_path), e.data_file.file_path


@pytest.mark.parametrize("fault", ["500", "502", "dropped"])
def test_a_failure_after_the_server_applied_the_commit_is_found_not_repeated(
    table: Any, proxy: FaultProxy, fault: str
) -> None:
    if fault == "dropped":
        proxy.drop(1)
    else:
        proxy.fail_after_apply(1, int(fault))
    snapshot = table.append(rows(range(5)))
    assert proxy.commits_seen == 1  # not sent again
    assert [s.snapshot_id for s in table.refresh().snapshots()] == [snapshot.snapshot_id]
    assert ids(table) == list(range(5))
    referenced_files_exist(table)


def test_a_commit_that_never_reached_the_server_is_unknown_and_keeps_its_files(
    table: Any, proxy: FaultProxy
) -> None:
    proxy.lose(1)  # the commit's connection drops before the server sees it
    with pytest.raises(CommitStateUnknownError, match="Nothing was deleted"):
        table.append(rows(range(3)))
    assert table.refresh().snapshots() == []


def test_a_409_storm_within_the_retries_lands_once(table: Any, proxy: FaultProxy) -> None:
    proxy.conflict(3)
    table.append(rows(range(4)))
    assert proxy.commits_seen == 4
    assert len(table.refresh().snapshots()) == 1
    assert ids(table) == list(range(4))


def test_sink_commit_answered_500_after_landing_is_committed_once(
    table: Any, proxy: FaultProxy, tmp_path: Path
) -> None:
    h = Harness(tmp_path, table, "rocksdb", job_id="job")
    h.open()
    proxy.fail_after_apply(1, 500)
    h.step(1, write_rows(table, [(1, "a"), (2, "b")]))
    h.step(2, write_rows(table, [(3, "c")]))
    h.close()
    assert ids(table) == [1, 2, 3]
    assert len(table.refresh().snapshots()) == 2
    assert h.watermark() == 2
    referenced_files_exist(table)


def test_sink_commit_unknown_then_retried_lands_once(
    table: Any, proxy: FaultProxy, tmp_path: Path
) -> None:
    """The commit never reached the server: the committer retries, the retry's watermark
    check finds nothing, the batch lands once."""
    h = Harness(tmp_path, table, "rocksdb", job_id="job")
    h.open()
    proxy.lose(1)
    proxy.refuse(1)  # lost; the refresh of the retry is refused once too
    h.step(1, write_rows(table, [(1, "a")]))
    h.close()
    assert ids(table) == [1]
    assert h.watermark() == 1


def test_sink_409_storm_past_the_retries_keeps_the_batch_staged_for_the_restart(
    table: Any, proxy: FaultProxy, tmp_path: Path
) -> None:
    h = Harness(tmp_path, table, "rocksdb", job_id="job")
    h.open()
    proxy.conflict(1000)
    with pytest.raises(CommitFailedError, match="stay staged"):
        h.step(1, write_rows(table, [(1, "a"), (2, "b")]))
    h.crash()
    proxy.conflicts = 0
    h.open()
    h.close()
    assert ids(table) == [1, 2]
    assert h.watermark() == 1
    referenced_files_exist(table)


def test_with_an_idempotency_key_a_dropped_commit_is_resent_with_the_same_key(
    seaweed: Any, rest_catalog: Any
) -> None:
    """The server advertises idempotency-key-lifetime (here: the proxy adds it, SeaweedFS
    does not): a commit whose answer was lost is sent again with the same key. SeaweedFS
    does not honour keys and refuses the copy (409); the catalog looks before treating
    that as a lost race, and finds its commit."""
    proxy = FaultProxy(seaweed.catalog_uri)
    try:
        proxy.advertise_idempotency()
        props = {
            **seaweed.rest_props("warehouse"),
            "uri": proxy.uri,
            "rest.retry-max-wait-ms": "50",
        }
        catalog = load_catalog("idem", type="rest", **props)
        assert catalog.client.idempotency
        table = catalog.create_table(f"{rest_catalog.test_namespace}.idem", SCHEMA)
        proxy.drop(1)
        table.append(rows(range(3)))
        keys = [h.get("Idempotency-Key") for h in proxy.commit_headers]
        assert len(keys) == 2 and keys[0] and keys[0] == keys[1]
        assert len(table.refresh().snapshots()) == 1
        assert ids(table) == [0, 1, 2]
        referenced_files_exist(table)
    finally:
        proxy.close()
