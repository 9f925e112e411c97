"""Domain metadata (PROTOCOL.md "Domain Metadata", the ``domainMetadata`` writer feature):
the action through commits, replay and checkpoints, the rules on which domains may be
written, the same-domain conflict, and delta-rs and DuckDB reading such a table.

Tests stream_sink.delta.domains: which domain metadata a commit may write.
Tests stream_sink.delta.snapshot: replay keeps the newest domain, a removal drops it.
Tests stream_sink.delta.checkpoint: checkpoints carry the live domains."""

from __future__ import annotations

import json
import os
import threading
import time

import pyarrow as pa
import pytest
from delta_readers import delta_rs_rows, duckdb_delta_rows
from delta_tables import action_parquet, commit, field, metadata, protocol, struct_type

from stream_sink.delta import DeltaTable, Protocol
from stream_sink.delta.actions import DomainMetadata, action_to_json, parse_action
from stream_sink.delta.checkpoint import read_checkpoint, write_checkpoint
from stream_sink.delta.expired_logs import remove_expired_logs
from stream_sink.delta.features import protocol_for, requested_features
from stream_sink.exceptions import (
    ConcurrentDomainMetadataError,
    UnsupportedError,
    ValidationError,
)

SCHEMA = pa.schema([("id", pa.int64())])
FEATURE = {"delta.feature.domainMetadata": "supported"}
DAY_MS = 24 * 3600 * 1000


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids}, schema=SCHEMA)


def set_domain(table: DeltaTable, domain: str, config: str) -> int:
    txn = table.refresh().new_transaction().set_domain(domain, lambda v, t: config)
    return txn.commit("SET DOMAIN")


@pytest.fixture
def loc(tmp_path) -> str:
    location = str(tmp_path / "t")
    DeltaTable.create(location, SCHEMA, configuration=FEATURE).append(rows([1, 2]))
    return location


def test_the_action_round_trips_through_json() -> None:
    action = DomainMetadata("app.x", '{"a":1}')
    doc = action_to_json(action)
    assert doc == {
        "domainMetadata": {"domain": "app.x", "configuration": '{"a":1}', "removed": False}
    }
    assert parse_action(json.loads(json.dumps(doc)), where="t") == action
    removed = {"domainMetadata": {"domain": "app.x", "configuration": "", "removed": True}}
    assert parse_action(removed, where="t") == DomainMetadata("app.x", "", True)


def test_a_new_table_asks_for_the_feature_by_table_property(loc: str) -> None:
    table = DeltaTable.load(loc)
    assert table.snapshot.protocol == Protocol(
        1, 7, None, ("appendOnly", "invariants", "domainMetadata")
    )
    assert "delta.feature.domainMetadata" not in table.snapshot.configuration
    both = protocol_for(True, FEATURE)
    assert both == Protocol(3, 7, ("timestampNtz",), ("timestampNtz", "domainMetadata"))
    assert protocol_for(False, {}) == Protocol(1, 2)
    lowered = {"delta.feature.domainmetadata": "Supported"}  # as Spark passes options
    assert protocol_for(False, lowered) == protocol_for(False, FEATURE)
    with pytest.raises(UnsupportedError, match="checkConstraints"):
        requested_features({"delta.feature.checkConstraints": "supported"})
    with pytest.raises(ValidationError, match="supported"):
        requested_features({"delta.feature.domainMetadata": "enabled"})


def test_replay_keeps_the_newest_per_domain_and_a_removal_drops_it(loc: str) -> None:
    table = DeltaTable.load(loc)
    set_domain(table, "app.x", "one")
    set_domain(table, "app.x", "two")
    set_domain(table, "app.y", "y")
    assert DeltaTable.load(loc).snapshot.domain_configuration("app.x") == "two"
    table.refresh().new_transaction().add(DomainMetadata("app.y", "", True)).commit("UNSET")
    reloaded = DeltaTable.load(loc).snapshot
    assert set(reloaded.domains) == {"app.x"}
    assert reloaded.domain_configuration("app.y") is None
    assert table.refresh().snapshot.domains == reloaded.domains  # incremental replay too


def test_the_checkpoint_carries_the_live_domains_past_log_cleanup(loc: str) -> None:
    table = DeltaTable.load(loc)
    set_domain(table, "app.x", '{"kept":true}')
    set_domain(table, "app.gone", "g")
    table.refresh().new_transaction().add(DomainMetadata("app.gone", "", True)).commit("UNSET")
    table.append(rows([3]))
    snapshot = table.refresh().snapshot
    write_checkpoint(table.log, snapshot)
    domains = [
        a for a in read_checkpoint(table.log, snapshot.version) if isinstance(a, DomainMetadata)
    ]
    assert domains == [DomainMetadata("app.x", '{"kept":true}')]
    later = int(time.time() * 1000) + 31 * DAY_MS  # every commit is past the retention
    assert remove_expired_logs(table.log, {}, now_ms=later) > 0
    assert table.log.list_commits() == [snapshot.version]
    reloaded = DeltaTable.load(loc).snapshot
    assert reloaded.domain_configuration("app.x") == '{"kept":true}'
    assert set(reloaded.domains) == {"app.x"}


def test_no_domain_without_the_feature_and_no_system_domains(tmp_path, loc: str) -> None:
    plain = DeltaTable.create(str(tmp_path / "plain"), SCHEMA)
    with pytest.raises(UnsupportedError, match=r"delta\.feature\.domainMetadata"):
        set_domain(plain, "app.x", "x")
    assert plain.refresh().version == 0
    with pytest.raises(ValidationError, match="system domains"):
        set_domain(DeltaTable.load(loc), "delta.rowTracking", "{}")
    txn = DeltaTable.load(loc).new_transaction().set_domain("app.x", lambda v, t: "a")
    with pytest.raises(ValidationError, match="more than once"):
        txn.add(DomainMetadata("app.x", "b")).commit("TWICE")


def test_a_concurrent_commit_of_the_same_domain_conflicts(loc: str) -> None:
    """PROTOCOL.md: a writer must fail a commit when a concurrent one wrote a domain it
    writes; other domains (and a commit writing none) do not conflict."""
    first, second = DeltaTable.load(loc), DeltaTable.load(loc)
    loser = second.new_transaction().set_domain("app.x", lambda v, t: "late")
    other = DeltaTable.load(loc).new_transaction().set_domain("app.y", lambda v, t: "y")
    set_domain(first, "app.x", "early")
    with pytest.raises(ConcurrentDomainMetadataError, match=r"app\.x"):
        loser.commit("SET DOMAIN")
    other.commit("SET DOMAIN")
    snapshot = DeltaTable.load(loc).snapshot
    assert snapshot.domain_configuration("app.x") == "early"
    assert snapshot.domain_configuration("app.y") == "y"


def test_racing_writers_of_one_domain_leave_exactly_one_winner(loc: str) -> None:
    tables = [DeltaTable.load(loc) for _ in range(4)]
    txns = [
        t.new_transaction().set_domain("app.x", lambda v, t, n=n: str(n))
        for n, t in enumerate(tables)
    ]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(txns))

    def run(txn) -> None:
        barrier.wait()
        try:
            txn.commit("SET DOMAIN")
            outcomes.append("won")
        except ConcurrentDomainMetadataError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=run, args=(t,)) for t in txns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict"] * 3 + ["won"]


def test_delta_rs_and_duckdb_read_a_table_with_domains_and_a_checkpoint(loc: str) -> None:
    table = DeltaTable.load(loc)
    set_domain(table, "app.x", '{"a":1}')
    table.append(rows([3]))
    write_checkpoint(table.log, table.refresh().snapshot)
    table.append(rows([4]))
    expected = [1, 2, 3, 4]
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == expected
    assert sorted(r["id"] for r in duckdb_delta_rows(loc)) == expected


def test_delta_rs_refuses_to_write_to_a_table_with_the_feature(loc: str) -> None:
    """delta-rs 1.x reads tables with ``domainMetadata`` but does not write them: why the
    sink's new tables get the feature only when asked. When this fails, delta-rs writes
    them: the default may change (docs/operations.md, "Where a Delta sink's position
    lives")."""
    from deltalake import write_deltalake

    with pytest.raises(Exception, match="DomainMetadata"):
        write_deltalake(loc, rows([5]), mode="append")
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == [1, 2]


def test_delta_rs_still_writes_a_table_created_without_the_feature(tmp_path) -> None:
    from deltalake import write_deltalake

    location = str(tmp_path / "plain")
    table = DeltaTable.create(location, SCHEMA)
    table.append(rows([1]))
    write_checkpoint(table.log, table.refresh().snapshot)
    write_deltalake(location, rows([2]), mode="append")
    assert sorted(r["id"] for r in DeltaTable.load(location).to_arrow().to_pylist()) == [1, 2]
    assert DeltaTable.load(location).snapshot.domains == {}


@pytest.mark.parametrize("kind", ["json", "parquet", "classic"])
def test_v2_and_classic_checkpoints_of_other_writers_give_their_domains(tmp_path, kind) -> None:
    """A checkpoint written by another engine (V2 spec: UUID-named JSON or Parquet, or
    classic) carries domains; the commits below it are gone, so only it can answer."""
    loc = str(tmp_path / "t")
    proto = protocol(3, 7, "v2Checkpoint", writer_only=["domainMetadata"])
    meta = metadata(struct_type(field("id", "long")), {"delta.checkpointPolicy": "v2"})
    kept = {"domainMetadata": {"domain": "app.x", "configuration": "{}", "removed": False}}
    commit(loc, 0, proto, meta, kept)
    later = {"domainMetadata": {"domain": "app.y", "configuration": "y", "removed": False}}
    commit(loc, 1, later)
    head = {"checkpointMetadata": {"version": 1, "tags": {}}}
    rows = [head, proto, meta, kept, later]
    stem = f"{loc}/_delta_log/{1:020d}.checkpoint"
    columns = ["checkpointMetadata", "protocol", "metaData", "domainMetadata"]
    if kind == "json":
        with open(f"{stem}.80a083e8-7026-4e79-81be-64bd76c43a11.json", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    else:
        name = (
            f"{stem}.80a083e8-7026-4e79-81be-64bd76c43a11.parquet"
            if kind == "parquet"
            else f"{stem}.parquet"
        )
        action_parquet(name, rows, columns)
    os.remove(f"{loc}/_delta_log/{0:020d}.json")
    os.remove(f"{loc}/_delta_log/{1:020d}.json")
    snapshot = DeltaTable.load(loc).snapshot
    assert snapshot.domains == {
        "app.x": DomainMetadata("app.x", "{}"),
        "app.y": DomainMetadata("app.y", "y"),
    }
