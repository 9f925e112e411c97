"""A TRUNCATE of the source table (Debezium ``op: t``) applied by the foreachBatch sinks at
its place in the stream: a batch's changes before it are dropped, the ones after it
land, and the batch's commit removes every file live before it; a batch of a truncate
alone empties the table. IcebergSink in upsert mode (its batch read in one task) and in
changelog mode (shuffled), DeltaSink, and the routed sink (a truncate names its table).
Read back by ours and DuckDB (Iceberg), delta-rs and DuckDB (Delta). A driver killed
around the truncating batch's commit applies it exactly once. The
``format("stream_sink")`` route refuses a truncate, saying what to use instead.

Tests stream_sink.spark.cdc.truncation: a truncate applied at its place in the stream.
Tests stream_sink.spark.foreach_batch.routing.truncates: a truncate empties its own table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from delta_readers import delta_rs_rows, duckdb_delta_rows
from kill_harness import KillJob, assert_committed_once, iceberg_marks
from readers import duckdb_rows
from streams import persisted_rdds, write_batches
from test_cdc import ORDERS, ROW_SCHEMA, order, orders_catalog

from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, DeltaSink, IcebergSink, from_debezium

pytestmark = pytest.mark.spark


def _event(op: str, lsn: int, before: Any, after: Any, table: str = "orders") -> dict:
    source = {"lsn": lsn, "db": "shop", "table": table}
    return {"op": op, "before": before, "after": after, "source": source}


def _record(key: int | None, value: dict) -> dict:
    """A Kafka record as Spark's Kafka source gives it: a truncate has no key."""
    return {"key": None if key is None else json.dumps({"order_id": key}),
            "value": json.dumps(value)}  # fmt: skip


def _c(i: int, lsn: int, status: str = "new", table: str = "orders") -> dict:
    return _record(i, _event("c", lsn, None, order(i, status, float(i)), table))


def _t(lsn: int, table: str = "orders") -> dict:
    return _record(None, _event("t", lsn, None, None, table))


BATCHES = [
    [_c(1, 1), _c(2, 2), _c(3, 3)],
    # before the truncate (dropped): an update of 2, a new key 4; after it: 5, updated
    [_c(2, 4, "paid"), _c(4, 5), _t(6), _c(5, 7), _c(5, 8, "paid")],
    [_c(6, 9)],
    [_t(10)],  # a truncate alone
    [_c(7, 11), _record(7, _event("d", 12, order(7, "new", 7.0), None)), _c(8, 13)],
]
# the rows after each batch (order_id, status)
AFTER = [
    [(1, "new"), (2, "new"), (3, "new")],
    [(5, "paid")],
    [(5, "paid"), (6, "new")],
    [],
    [(8, "new")],
]


def _changes(spark: Any, source: Path, **options: Any) -> Any:
    kafka = (
        spark.readStream.schema("key string, value string")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
    )
    return from_debezium(kafka, row_schema=ROW_SCHEMA, order_by="source.lsn", **options)


def _run(df: Any, foreach: Any, checkpoint: str) -> None:
    query = (
        df.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def _pairs(rows: list[dict]) -> list[tuple[int, str]]:
    return sorted((r["order_id"], r["status"]) for r in rows)


@pytest.mark.parametrize("mode", ["upsert", "changelog"])
def test_iceberg_sink_applies_each_truncate_at_its_place_exactly_once(
    spark: Any, tmp_path: Path, mode: str
) -> None:
    catalog = orders_catalog(tmp_path)
    catalog.create_table("db.orders", schema=ORDERS, identifier_fields=["order_id"])
    write_batches(tmp_path / "in", BATCHES)
    sink = IcebergSink(
        catalog=catalog, table="db.orders", mode=mode, row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN, checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )  # fmt: skip
    changes = _changes(spark, tmp_path / "in")
    if mode == "changelog":  # shuffled by key instead of ordered in the batch's one task
        changes = changes.repartition(2)
    try:
        _run(changes, sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()
    table = catalog.load_table("db.orders")
    assert _pairs(table.scan().to_arrow().to_pylist()) == AFTER[-1]
    assert _pairs(duckdb_rows(table.metadata_location)) == AFTER[-1]
    stamped = {
        int(s.summary["stream-sink.max-committed-checkpoint-id"]): s
        for s in table.snapshots()
        if "stream-sink.max-committed-checkpoint-id" in s.summary
    }
    assert sorted(stamped) == [0, 1, 2, 3, 4]  # one snapshot per batch, none twice
    for batch, snap in stamped.items():
        rows = table.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()
        assert _pairs(rows) == AFTER[batch], f"after batch {batch}"
    assert int(stamped[1].summary["deleted-data-files"]) >= 1
    assert stamped[3].summary["operation"] == "delete"
    assert int(stamped[3].summary.get("total-data-files", "0")) == 0


def test_delta_sink_applies_each_truncate_at_its_place_exactly_once(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "in", BATCHES)
    lake = str(tmp_path / "lake")
    sink = DeltaSink(
        path=lake, mode="upsert", equality_fields=["order_id"], row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN, checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )  # fmt: skip
    persisted = persisted_rdds(spark)
    try:
        _run(_changes(spark, tmp_path / "in"), sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()
    assert persisted_rdds(spark) == persisted  # also after a truncating batch's failed job
    assert _pairs(delta_rs_rows(lake)) == AFTER[-1]
    assert _pairs(duckdb_delta_rows(lake)) == AFTER[-1]
    from stream_sink.delta import DeltaTable

    table = DeltaTable.load(lake)
    app = next(iter(table.snapshot.txns))
    for version in range(1, table.version + 1):
        batch = table.snapshot_at(version).txn_version(app)
        assert batch is not None
        assert _pairs(delta_rs_rows(lake, version=version)) == AFTER[batch], f"v{version}"


def test_routed_sink_truncates_only_the_table_an_event_names(spark: Any, tmp_path: Path) -> None:
    catalog = orders_catalog(tmp_path)
    write_batches(
        tmp_path / "in",
        [
            [_c(1, 1, table="a"), _c(1, 2, table="b")],
            [_c(2, 3, table="a"), _t(4, table="a"), _c(3, 5, table="a"), _c(2, 6, table="b"),
             _t(7, table="never_written")],
        ],
    )  # fmt: skip
    sink = IcebergSink(
        catalog=catalog, table_column="_table", namespaces=["shop"], create_tables=True,
        mode="upsert",
        row_kind_column=ROW_KIND_COLUMN, order_by=ORDER_COLUMN,
        checkpoint_location=str(tmp_path / "chk"), state_dir=str(tmp_path / "state"),
    )  # fmt: skip

    def write(df: Any, batch_id: int) -> None:
        sink.foreach_batch(df, batch_id)

    changes = _changes(spark, tmp_path / "in", table_column="_table", key_column="key")
    try:
        _run(changes, write, sink.spark_checkpoint_location)
    finally:
        sink.close()
    a, b = catalog.load_table("shop.a"), catalog.load_table("shop.b")
    assert _pairs(duckdb_rows(a.metadata_location)) == [(3, "new")]
    assert _pairs(duckdb_rows(b.metadata_location)) == [(1, "new"), (2, "new")]
    assert not catalog.table_exists("shop.never_written")


def test_data_source_route_refuses_a_truncate_naming_foreach_batch(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    from stream_sink.spark import register
    from stream_sink.spark.datasource.register import supports_data_source

    if not supports_data_source():
        pytest.skip("Spark's Python Data Source API needs pyspark >= 4.0")
    register(spark)
    catalog = orders_catalog(tmp_path)
    catalog.create_table("db.orders", schema=ORDERS, identifier_fields=["order_id"])
    write_batches(tmp_path / "in", BATCHES[:2])
    writer = (
        _changes(spark, tmp_path / "in")
        .writeStream.format("stream_sink")
        .option("catalog.type", "hadoop")
        .option("catalog.warehouse", str(tmp_path / "warehouse"))
        .option("table", "db.orders")
        .option("mode", "upsert")
        .option("row-kind-column", ROW_KIND_COLUMN)
        .option("order-by", ORDER_COLUMN)
        .option("state-dir", str(tmp_path / "state"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
    )
    with pytest.raises(StreamingQueryException) as e:
        writer.start().awaitTermination()
    text = str(e.value)
    assert "TRUNCATE" in text and "foreachBatch" in text and "UnsupportedError" in text
    rows = catalog.load_table("db.orders").scan().to_arrow().to_pylist()
    assert _pairs(rows) == AFTER[0]  # batch 0 committed, nothing of batch 1


KILL_JOB = Path(__file__).with_name("truncate_kill_job.py")


@pytest.mark.slow
def test_iceberg_killed_around_the_truncating_commit_applies_it_exactly_once(
    tmp_path: Path,
) -> None:
    """Killed with the truncating batch staged (before its commit), then again right after
    its snapshot landed (restore commits it, the state still lists it): every snapshot
    holds the rows of the batches up to the one it is stamped with."""
    catalog = orders_catalog(tmp_path)
    catalog.create_table("db.orders", schema=ORDERS, identifier_fields=["order_id"])
    write_batches(tmp_path / "in", BATCHES)
    job = KillJob(KILL_JOB, [str(tmp_path), "iceberg"], log=tmp_path / "job.log", timeout=600)
    job.killed_at("after-staged-write@2")  # batch 1, the truncating one, staged
    job.killed_at("after-table-commit@1")  # its commit, by the restore, landed
    job.run_to_end()
    table = catalog.load_table("db.orders")
    assert _pairs(duckdb_rows(table.metadata_location)) == AFTER[-1]
    marks = iceberg_marks(table)
    assert_committed_once(marks, "iceberg")
    for snap, batch in zip(table.snapshots(), marks, strict=True):
        rows = table.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()
        assert _pairs(rows) == AFTER[batch], f"after batch {batch}"


@pytest.mark.slow
def test_delta_killed_before_the_truncating_version_is_published_applies_it_once(
    tmp_path: Path,
) -> None:
    write_batches(tmp_path / "in", BATCHES)
    job = KillJob(KILL_JOB, [str(tmp_path), "delta"], log=tmp_path / "job.log", timeout=600)
    job.killed_at("after-metadata-file-write@2")  # batch 1's version written, not published
    job.run_to_end()
    from stream_sink.delta import DeltaTable

    lake = str(tmp_path / "lake")
    table = DeltaTable.load(lake)
    assert _pairs(delta_rs_rows(lake)) == AFTER[-1]
    (app,) = table.snapshot.txns
    marks = [table.snapshot_at(v).txn_version(app) for v in range(1, table.version + 1)]
    assert_committed_once(marks, "delta")
    for version, batch in zip(range(1, table.version + 1), marks, strict=True):
        assert batch is not None
        assert _pairs(delta_rs_rows(lake, version=version)) == AFTER[batch], f"v{version}"
