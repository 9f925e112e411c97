"""One checkpoint committed to several tables through a REST catalog's
``transactions/commit``, against Apache Iceberg's REST server and Nessie's, through a
fault-injecting proxy: the answer lost after the server applied it (5xx, dropped
connection), the request lost before it, a 409; and a server that does not list the
endpoint, where the tables commit one by one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fault_proxy import FaultProxy
from harness import SCHEMA, write_rows

from stream_sink.catalogs import load_catalog
from stream_sink.commit.iceberg.multi_table import (
    TableCheckpoint,
    atomic_commit_problem,
    commit_checkpoint,
)
from stream_sink.commit.iceberg.table_commit import SinkIdentity
from stream_sink.commit.iceberg.watermark import committed_watermark
from stream_sink.commit.shapes import CommitGroup, Shape, StagedBatch
from stream_sink.exceptions import PartialCommitError
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.table.catalog.rest.catalog import COMMIT_TRANSACTION
from stream_sink.table.manifest import read_manifest_list

pytestmark = pytest.mark.slow

JOB = "job-1"
FAST = {"commit.retry.min-wait-ms": "5", "commit.retry.max-wait-ms": "50"}


@pytest.fixture(params=["iceberg", "nessie"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    if request.param == "iceberg":
        rest = request.getfixturevalue("iceberg_rest")
        yield rest.uri, {}
        return
    nessie = request.getfixturevalue("nessie")
    seaweed = request.getfixturevalue("vending_seaweed")
    props = nessie.rest_props(seaweed.s3_props["s3.region"])
    yield props.pop("uri"), props


@pytest.fixture
def proxy(server: tuple[str, dict[str, str]]) -> Iterator[FaultProxy]:
    p = FaultProxy(server[0])
    yield p
    p.close()


def open_catalog(proxy: FaultProxy, server: tuple[str, dict[str, str]]) -> Any:
    props = {**server[1], "rest.retry-max-wait-ms": "50"}
    uri = proxy.uri + urlsplit(server[0]).path  # Nessie serves under /iceberg
    return load_catalog(f"c{uuid.uuid4().hex[:6]}", type="rest", uri=uri, **props)


def tables(catalog: Any, n: int = 2) -> list[Any]:
    ns = f"ns{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(ns)
    return [
        catalog.create_table(f"{ns}.t{i}", SCHEMA, identifier_fields=["id"], properties=FAST)
        for i in range(n)
    ]


def checkpoint(ts: list[Any], batch: int) -> list[TableCheckpoint]:
    out = []
    for i, t in enumerate(ts):
        files = write_rows(t, [(batch * 10 + i, t.name)])
        group = CommitGroup(Shape.APPEND, (StagedBatch(batch, batch, b"", files),), batch)
        who = SinkIdentity(JOB, f"sink={t.name}", "main", {})
        out.append(TableCheckpoint(t, group, who, CommitterMetrics(lambda: 0.0)))
    return out


def state(catalog: Any, ts: list[Any]) -> list[tuple[int, int]]:
    """Each table's (watermark, snapshot count) as the catalog shows it now."""
    out = []
    for t in ts:
        meta = catalog.load_table(t.name).metadata
        out.append((committed_watermark(meta, JOB, f"sink={t.name}"), len(meta.snapshots)))
    return out


def transactions(proxy: FaultProxy) -> int:
    return sum(1 for b in proxy.commit_bodies if "table-changes" in b)


def test_one_transaction_commits_every_table(proxy: FaultProxy, server: Any) -> None:
    catalog = open_catalog(proxy, server)
    ts = tables(catalog, 3)
    assert atomic_commit_problem(catalog) is None
    assert commit_checkpoint(checkpoint(ts, 1)) == {t.name: None for t in ts}
    assert transactions(proxy) == 1 and len(proxy.commit_bodies) == 1
    assert proxy.commit_headers[0].get("Idempotency-Key")
    assert state(catalog, ts) == [(1, 1)] * 3


@pytest.mark.parametrize("fault", ["500", "504", "dropped"])
def test_an_answer_lost_after_the_server_applied_it_is_settled_by_reading_back(
    proxy: FaultProxy, server: Any, fault: str
) -> None:
    catalog = open_catalog(proxy, server)
    ts = tables(catalog)
    if fault == "dropped":
        proxy.drop(1)
    else:
        proxy.fail_after_apply(1, int(fault))
    assert commit_checkpoint(checkpoint(ts, 2)) == {t.name: None for t in ts}
    assert transactions(proxy) == 1  # found applied: not sent again
    assert state(catalog, ts) == [(2, 1)] * 2


def test_a_request_lost_before_the_server_is_committed_once_on_retry(
    proxy: FaultProxy, server: Any
) -> None:
    catalog = open_catalog(proxy, server)
    ts = tables(catalog)
    proxy.lose(1)
    assert commit_checkpoint(checkpoint(ts, 3)) == {t.name: None for t in ts}
    assert transactions(proxy) == 2
    assert state(catalog, ts) == [(3, 1)] * 2


def test_a_conflict_is_retried(proxy: FaultProxy, server: Any) -> None:
    catalog = open_catalog(proxy, server)
    ts = tables(catalog)
    proxy.conflict(1)
    assert commit_checkpoint(checkpoint(ts, 4)) == {t.name: None for t in ts}
    assert transactions(proxy) == 2
    assert state(catalog, ts) == [(4, 1)] * 2


def test_a_server_without_the_endpoint_commits_table_by_table(
    proxy: FaultProxy, server: Any
) -> None:
    proxy.hide_endpoint(COMMIT_TRANSACTION)
    catalog = open_catalog(proxy, server)
    if not catalog.client.endpoints:
        pytest.skip("the server lists no endpoints")
    ts = tables(catalog)
    problem = atomic_commit_problem(catalog)
    assert problem is not None and "transactions/commit" in problem
    assert commit_checkpoint(checkpoint(ts, 5)) == {t.name: None for t in ts}
    assert transactions(proxy) == 0 and len(proxy.commit_bodies) == 2
    assert state(catalog, ts) == [(5, 1)] * 2


def test_a_torn_transaction_is_reported_and_nothing_is_deleted(
    proxy: FaultProxy, server: Any
) -> None:
    catalog = open_catalog(proxy, server)
    ts = tables(catalog)
    proxy.tear(1)  # the server applies the first table's change only, then answers 500
    with pytest.raises(PartialCommitError, match=r"\.t0 but not on .*\.t1"):
        commit_checkpoint(checkpoint(ts, 6))
    assert transactions(proxy) == 1  # never retried
    assert state(catalog, ts) == [(6, 1), (-1, 0)]
    snap = catalog.load_table(ts[0].name).current_snapshot()
    for m in read_manifest_list(ts[0].io, snap.manifest_list):  # what it references is kept
        assert ts[0].io.exists(m.manifest_path)


def test_a_server_answering_404_is_found_out_and_tables_commit_one_by_one(
    proxy: FaultProxy, server: Any
) -> None:
    proxy.hide_endpoint("*")  # lists no endpoints: transactions/commit is tried
    catalog = open_catalog(proxy, server)
    ts = tables(catalog)
    assert atomic_commit_problem(catalog) is None
    proxy.missing(1)
    assert commit_checkpoint(checkpoint(ts, 7)) == {t.name: None for t in ts}
    problem = atomic_commit_problem(catalog)
    assert problem is not None and "404" in problem
    assert transactions(proxy) == 1 and len(proxy.commit_bodies) == 3  # then one by one
    assert state(catalog, ts) == [(7, 1)] * 2
