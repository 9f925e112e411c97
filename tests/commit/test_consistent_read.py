"""A consistent read across the tables one routed sink writes: each table read at the
version stamped with the newest checkpoint every table has reached, on a per-table
catalog (Hadoop) where the tables commit one by one, and on Delta tables.

Tests stream_sink.cli.consistent_command: ``stream-sink table consistent``."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest
from harness import SCHEMA, write_rows

from stream_sink.catalogs import load_catalog
from stream_sink.commit.consistent import choose, routed_operator_id
from stream_sink.commit.delta.consistent import consistent_versions
from stream_sink.commit.delta.target import app_id
from stream_sink.commit.iceberg.consistent import routed_snapshots
from stream_sink.commit.iceberg.table_commit import SinkIdentity, commit_group
from stream_sink.commit.shapes import CommitGroup, Shape, StagedBatch
from stream_sink.delta import DeltaTable, Txn
from stream_sink.delta.writer import write_data_files
from stream_sink.exceptions import NoSuchSnapshotError
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.table.catalog import Catalog

JOB, SINK = "job-1", "shop"
NAMES = ("db.orders", "db.lines", "db.stock")


def catalog(tmp_path: Path) -> Catalog:
    cat = load_catalog("h", type="hadoop", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    for n in NAMES:
        cat.create_table(n, SCHEMA, identifier_fields=["id"])
    return cat


def commit(cat: Catalog, name: str, batch: int) -> int:
    """Commit batch ``batch`` to ``name`` as the routed sink does; its snapshot id."""
    t = cat.load_table(name)
    files = write_rows(t, [(batch, name)])
    group = CommitGroup(Shape.APPEND, (StagedBatch(batch, batch, b"", files),), batch)
    who = SinkIdentity(JOB, routed_operator_id(SINK, name), "main", {})
    assert commit_group(t, group, who, CommitterMetrics(time.monotonic)) is None
    snap = t.refresh().current_snapshot()
    assert snap is not None
    return snap.snapshot_id


def ids_at(cat: Catalog, name: str, snapshot_id: int) -> list[int]:
    table = cat.load_table(name)
    return sorted(table.scan(snapshot_id=snapshot_id).to_arrow().column("id").to_pylist())  # type: ignore[attr-defined]


def test_tables_mid_checkpoint_are_read_at_the_checkpoint_all_reached(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    at_2 = {}
    for batch in (1, 2):
        for n in NAMES:
            at_2[n] = commit(cat, n, batch)
    commit(cat, "db.orders", 3)  # checkpoint 3: orders committed, lines and stock not yet
    read = routed_snapshots(cat, JOB, SINK, NAMES)
    assert read.checkpoint_id == 2
    assert {t.table: t.version for t in read.tables} == at_2
    assert all(t.exact for t in read.tables)
    assert ids_at(cat, "db.orders", read.version_of("db.orders")) == [1, 2]  # not 3 yet
    commit(cat, "db.lines", 3)
    commit(cat, "db.stock", 3)
    read = routed_snapshots(cat, JOB, SINK, NAMES)
    assert read.checkpoint_id == 3 and all(t.exact for t in read.tables)


def test_a_table_the_checkpoint_did_not_touch_is_read_at_its_older_stamp(
    tmp_path: Path,
) -> None:
    cat = catalog(tmp_path)
    first = {n: commit(cat, n, 1) for n in NAMES}
    commit(cat, "db.orders", 2)
    second = commit(cat, "db.lines", 2)
    read = routed_snapshots(cat, JOB, SINK, ["db.orders", "db.lines"])
    assert read.checkpoint_id == 2
    # with stock (not written since checkpoint 1) the newest checkpoint all reached is 1
    read = routed_snapshots(cat, JOB, SINK, NAMES)
    assert read.checkpoint_id == 1
    assert {t.table: t.version for t in read.tables} == first
    assert second not in {t.version for t in read.tables}


def test_a_table_the_sink_never_stamped_cannot_be_read_consistently(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    commit(cat, "db.orders", 1)
    with pytest.raises(NoSuchSnapshotError, match=r"db\.lines holds no version stamped"):
        routed_snapshots(cat, JOB, SINK, NAMES)


def test_the_rule_refuses_a_table_whose_stamps_at_the_checkpoint_expired() -> None:
    stamps = {"a": [(5, 50), (4, 40)], "b": [(9, 90)]}
    with pytest.raises(NoSuchSnapshotError, match="no version stamped by sink sa at or below"):
        choose(stamps, {"a": "sa", "b": "sa"})
    read = choose({"a": [(5, 50), (4, 40)], "b": [(9, 90), (3, 30)]}, {"a": "s", "b": "s"})
    assert read.checkpoint_id == 5
    assert [(t.version, t.exact) for t in read.tables] == [(50, True), (30, False)]


def delta_commit(table: DeltaTable, operator_id: str, batch: int) -> int:
    data = pa.table({"id": [batch], "data": [str(batch)]}, schema=SCHEMA)
    adds = write_data_files(
        table.location, data, table.schema, table.partition_columns, io=table.io
    )
    txn = table.new_transaction().add_all(adds).add(Txn(app_id(JOB, operator_id), batch))
    return txn.commit("WRITE", {"mode": "Append"})


def test_delta_tables_are_read_at_the_version_carrying_the_batch(tmp_path: Path) -> None:
    tables = [DeltaTable.create(str(tmp_path / n), SCHEMA) for n in ("orders", "lines")]
    ops = [routed_operator_id(SINK, n) for n in ("orders", "lines")]
    at_1 = [delta_commit(t, o, 1) for t, o in zip(tables, ops, strict=True)]
    delta_commit(tables[0], ops[0], 2)  # lines has not reached checkpoint 2
    read = consistent_versions(tables, JOB, ops)
    assert read.checkpoint_id == 1
    assert [t.version for t in read.tables] == at_1
    assert tables[0].to_arrow(read.tables[0].version).column("id").to_pylist() == [1]


def test_the_cli_names_the_snapshot_of_each_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from stream_sink.cli.main import main

    cat = catalog(tmp_path)
    at_1 = {n: commit(cat, n, 1) for n in NAMES}
    commit(cat, "db.orders", 2)
    args = ["table", "consistent", *NAMES, "--job-id", JOB, "--sink-id", SINK]
    assert main([*args, "--warehouse", str(tmp_path / "wh"), "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["table"]: r["snapshot_id"] for r in rows} == at_1
    assert {r["read_checkpoint"] for r in rows} == {1}
