"""One Debezium stream of three tables into three Iceberg tables through one query
(``IcebergSink(table_column=..., create_tables=True)``): tables created with their own
schema and key, each exact, each with its own watermark; bad routing values stop the query.

Tests stream_sink.spark.foreach_batch.routing: one stream routed into many tables.
Tests stream_sink.spark.foreach_batch.routing.router: each routed batch's walk.
Tests stream_sink.spark.foreach_batch.routing.discovery: what a routed batch holds.
Tests stream_sink.spark.foreach_batch.routing.template: tables created on first sight.
Tests stream_sink.spark.foreach_batch.routing.dead_letters: bad routing values.
Tests stream_sink.spark.foreach_batch.routing.committers: a committer per table.
Tests stream_sink.spark.foreach_batch.routing.registry: the tables written, reopened.
Tests stream_sink.spark.foreach_batch.routing.table_updates: each table's write plan.
Tests stream_sink.spark.foreach_batch.routing.writer: one Spark job for every table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from many_tables import KEYS, SOURCE_SCHEMA, TABLES, events
from streams import run_available, run_sink, write_batches

import stream_sink as ss
from stream_sink.maintenance import MaintenanceOptions
from stream_sink.spark import IcebergSink
from stream_sink.spark.cdc.debezium import from_debezium
from stream_sink.state import state_dir_for
from stream_sink.table.catalog import Catalog


def routed_sink(catalog: Catalog, root: Path, **kwargs: Any) -> IcebergSink:
    return IcebergSink(
        catalog=catalog,
        table_column="_table",
        namespaces=["inv", "shop"],
        create_tables=True,
        mode="upsert",
        row_kind_column="_row_kind",
        order_by="_cdc_order",
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
        **kwargs,
    )


def run(spark: Any, root: Path, sink: IcebergSink) -> None:
    def foreach(df: Any, batch_id: int) -> None:
        changes = from_debezium(df, row_schema=TABLES, table_column="_table", key_column="key")
        sink.foreach_batch(changes, batch_id)

    try:
        run_available(spark, root / "in", SOURCE_SCHEMA, foreach, sink.spark_checkpoint_location)
    finally:
        sink.close()


def test_one_query_into_three_tables_each_exact(spark: Any, tmp_path: Path) -> None:
    batches, model = events(files=4, per_file=25)
    write_batches(tmp_path / "in", batches)
    catalog = ss.load_catalog("many", type="hadoop", warehouse=str(tmp_path / "wh"))
    run(spark, tmp_path, routed_sink(catalog, tmp_path))
    for name, schema in TABLES.items():
        table = catalog.load_table(name)
        assert table.schema().identifier_field_names == [KEYS[name]]
        assert table.properties["write.metadata.delete-after-commit.enabled"] == "true"
        assert table.properties["write.metadata.previous-versions-max"] == "50"
        assert table.schema().column_names == [c.split()[0] for c in schema.split(", ")]
        got = {r[KEYS[name]]: r for r in table.scan().to_arrow().to_pylist()}
        assert got == model[name], name
        ops = {s.summary["stream-sink.operator-id"] for s in table.snapshots()}
        assert ops == {f"routed-_table={name}"}
    # the same query again: every batch is a replay for every table
    locations = {n: catalog.load_table(n).metadata_location for n in TABLES}
    run(spark, tmp_path, routed_sink(catalog, tmp_path))
    assert {n: catalog.load_table(n).metadata_location for n in TABLES} == locations


SHARED_COLUMN_TABLES = {
    "shop.stock": "sku long, qty long",
    "shop.lines": "order_id long, line_no int, sku long, qty long",
}


def _change(table: str, key: dict[str, Any], op: str, image: dict[str, Any], lsn: int) -> dict:
    db, name = table.split(".")
    before, after = (image, None) if op == "d" else (None, image)
    value = {"op": op, "before": before, "after": after,
             "source": {"db": db, "table": name, "lsn": lsn}}  # fmt: skip
    return {"key": json.dumps(key), "value": json.dumps(value)}


def test_a_column_keying_another_table_does_not_split_or_reorder_a_keys_changes(
    spark: Any, tmp_path: Path
) -> None:
    """``shop.lines`` carries ``sku``, the key of ``shop.stock``. A line inserted and
    deleted in one batch, the delete's before image holding only the line's key (as
    Debezium sends it under PostgreSQL's default replica identity, the other columns
    zero), ends deleted: hashed or sorted by ``sku`` as well, the delete landed in
    another task or ahead of the insert, and the line stayed."""
    line = {"order_id": 1, "line_no": 1}
    batch = [
        _change("shop.stock", {"sku": 7}, "c", {"sku": 7, "qty": 10}, 1),
        _change("shop.lines", line, "c", {**line, "sku": 7, "qty": 3}, 2),
        _change("shop.lines", {**line, "line_no": 2}, "c", {**line, "line_no": 2, "sku": 8,
                                                          "qty": 1}, 3),
        _change("shop.lines", line, "d", {**line, "sku": 0, "qty": 0}, 4),
    ]  # fmt: skip
    write_batches(tmp_path / "in", [batch])
    catalog = ss.load_catalog("shared", type="hadoop", warehouse=str(tmp_path / "wh"))
    sink = routed_sink(catalog, tmp_path)

    def foreach(df: Any, batch_id: int) -> None:
        rows = SHARED_COLUMN_TABLES
        changes = from_debezium(df, row_schema=rows, table_column="_table", key_column="key")
        sink.foreach_batch(changes, batch_id)

    try:
        run_available(
            spark, tmp_path / "in", SOURCE_SCHEMA, foreach, sink.spark_checkpoint_location
        )
    finally:
        sink.close()
    lines = catalog.load_table("shop.lines").scan().to_arrow().to_pylist()
    assert lines == [{"order_id": 1, "line_no": 2, "sku": 8, "qty": 1}]
    assert catalog.load_table("shop.stock").scan().to_arrow().to_pylist() == [{"sku": 7, "qty": 10}]


def test_each_routed_table_gets_in_sink_maintenance(spark: Any, tmp_path: Path) -> None:
    """``maintenance=`` with ``table_column=``: per-table triggers, one run at a time,
    in the foreground here (each micro-batch waits for at most one table's run)."""
    batches, model = events(files=4, per_file=25)
    write_batches(tmp_path / "in", batches)
    catalog = ss.load_catalog("many", type="hadoop", warehouse=str(tmp_path / "wh"))
    options = MaintenanceOptions(commit_count=2, min_input_files=2, background=False)
    sink = routed_sink(catalog, tmp_path, maintenance=options)
    run(spark, tmp_path, sink)
    for name in TABLES:
        got = {r[KEYS[name]]: r for r in catalog.load_table(name).scan().to_arrow().to_pylist()}
        assert got == model[name], name
    assert sink.routed_maintenance is not None
    runs = {n: m.runs for n, m in sink.routed_maintenance.metrics_by_table.items()}
    assert set(runs) == set(TABLES) and sum(runs.values()) >= 2, runs
    metrics = sink.maintenance_metrics
    assert metrics is not None and metrics.failures == 0 and metrics.runs == sum(runs.values())
    replaced = [
        n
        for n in TABLES
        if any(s.operation == "replace" for s in catalog.load_table(n).snapshots())
    ]
    assert set(replaced) == {n for n, r in runs.items() if r}, (replaced, runs)


def test_a_routing_value_naming_no_table_stops_the_query(spark: Any, tmp_path: Path) -> None:
    batches, _ = events(files=1, per_file=5)
    write_batches(tmp_path / "in", batches)
    catalog = ss.load_catalog("many", type="hadoop", warehouse=str(tmp_path / "wh"))
    sink = IcebergSink(
        catalog=catalog,
        table_column="_table",
        namespaces=["inv", "shop"],
        mode="upsert",
        row_kind_column="_row_kind",
        order_by="_cdc_order",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    with pytest.raises(Exception, match="names no table") as err:
        run(spark, tmp_path, sink)
    assert "create_tables=True" in str(err.value)
    assert catalog.list_namespaces() == []


def test_rows_naming_no_table_go_to_the_dead_letter_table(spark: Any, tmp_path: Path) -> None:
    batches, model = events(files=2, per_file=12)
    write_batches(tmp_path / "in", batches)
    catalog = ss.load_catalog("many", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("inv")
    catalog.create_table(
        "inv.customers",
        schema=pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string())]),
        identifier_fields=["id"],
    )
    sink = IcebergSink(
        catalog=catalog,
        table_column="_table",
        namespaces=["inv", "shop"],
        mode="upsert",
        row_kind_column="_row_kind",
        order_by="_cdc_order",
        dead_letter_table="errors.dead",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    run(spark, tmp_path, sink)
    got = {r["id"]: r for r in catalog.load_table("inv.customers").scan().to_arrow().to_pylist()}
    assert got == model["inv.customers"]
    dead = catalog.load_table("errors.dead").scan().to_arrow()
    assert set(dead.column("_table").to_pylist()) == {"inv.orders", "shop.items"}
    assert "_row_kind" in dead.column_names and "order_id" in dead.column_names


def test_a_tables_lost_state_with_acknowledged_batches_refuses_to_start(
    spark: Any, tmp_path: Path
) -> None:
    """Spark acknowledged batches 0 and 1; one table held them only in its state, which is
    then deleted: the next start refuses, naming that table and those batches, and
    changes nothing."""
    batches, _ = events(files=3, per_file=25)
    write_batches(tmp_path / "in", batches[:2])
    catalog = ss.load_catalog("many", type="hadoop", warehouse=str(tmp_path / "wh"))
    sink = routed_sink(catalog, tmp_path, checkpoint_interval_batches=100)

    def foreach(df: Any, batch_id: int) -> None:
        changes = from_debezium(df, row_schema=TABLES, table_column="_table", key_column="key")
        sink.foreach_batch(changes, batch_id)

    run_available(spark, tmp_path / "in", SOURCE_SCHEMA, foreach, sink.spark_checkpoint_location)
    sink._abandon()  # a crash: nothing committed, both batches only in the operator states
    shutil.rmtree(state_dir_for(str(tmp_path / "state"), "routed-_table=inv.customers"))
    write_batches(tmp_path / "in", batches[2:], first=2)
    with pytest.raises(Exception, match=r"inv\.customers.*acknowledged batches \[0, 1\]"):
        run(spark, tmp_path, routed_sink(catalog, tmp_path))
    assert catalog.load_table("inv.customers").current_snapshot() is None


ROWS_SCHEMA = "t string, id long, v string, seq long, k string"


def rows_sink(catalog: Catalog, root: Path, **kwargs: Any) -> IcebergSink:
    """A routed upsert sink over plain rows (``t`` names the table, ``k`` the row kind)."""
    return IcebergSink(
        catalog=catalog,
        table_column="t",
        mode="upsert",
        row_kind_column="k",
        order_by="seq",
        table_template=dict(identifier_fields=["id"]),
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
        **kwargs,
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("finance.ledger", "in namespace 'finance', outside this sink's namespaces"),
        ("inv.customers.metadata", "in namespace 'inv.customers', outside"),
        ("inv.a/b", "a part of it holds '/'"),
    ],
    ids=["another namespace", "a dotted table name", "a slash"],
)
def test_rows_naming_a_table_outside_the_namespaces_stop_the_query_before_anything_is_made(
    spark: Any, tmp_path: Path, value: str, message: str
) -> None:
    write_batches(
        tmp_path / "in",
        [[{"t": "inv.customers", "id": 1, "v": "a", "seq": 1, "k": "+I"},
          {"t": value, "id": 2, "v": "b", "seq": 2, "k": "+I"}]],
    )  # fmt: skip
    catalog = ss.load_catalog("many", type="hadoop", warehouse=str(tmp_path / "wh"))
    sink = rows_sink(catalog, tmp_path, namespaces=["inv"], create_tables=True)
    with pytest.raises(Exception, match=message) as err:
        run_sink(spark, tmp_path / "in", ROWS_SCHEMA, sink)
    assert repr(value) in str(err.value)
    assert ("outside" not in message) or f"add {value.rsplit('.', 1)[0]!r} to namespaces=" in str(
        err.value
    )
    assert catalog.list_namespaces() == []  # inv.customers is not created either
    assert not (tmp_path / "wh").exists() or not any((tmp_path / "wh").iterdir())


def test_rows_outside_the_namespaces_go_to_the_dead_letter_table(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(
        tmp_path / "in",
        [[{"t": "inv.customers", "id": 1, "v": "a", "seq": 1, "k": "+I"},
          {"t": "finance.ledger", "id": 2, "v": "b", "seq": 2, "k": "+I"},
          {"t": "inv.customers.metadata", "id": 3, "v": "c", "seq": 3, "k": "+I"}]],
    )  # fmt: skip
    catalog = ss.load_catalog("many", type="hadoop", warehouse=str(tmp_path / "wh"))
    sink = rows_sink(
        catalog, tmp_path, namespaces=["inv"], create_tables=True, dead_letter_table="errors.dead"
    )
    run_sink(spark, tmp_path / "in", ROWS_SCHEMA, sink)
    assert sorted(".".join(n) for n in catalog.list_namespaces()) == ["errors", "inv"]
    assert [".".join(t) for t in catalog.list_tables("inv")] == ["inv.customers"]
    dead = catalog.load_table("errors.dead").scan().to_arrow()
    assert sorted(dead.column("t").to_pylist()) == ["finance.ledger", "inv.customers.metadata"]


def test_a_truncate_empties_only_a_table_the_sink_owns(spark: Any, tmp_path: Path) -> None:
    """``inv.ledger`` is the operator's: a TRUNCATE of it stops the query, changing
    nothing, until ``tables=`` gives it to the sink."""
    catalog = ss.load_catalog("many", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("inv")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("seq", pa.int64())])
    ledger = catalog.create_table("inv.ledger", schema=schema, identifier_fields=["id"])
    ledger.append(pa.table({"id": [1, 2], "v": ["x", "y"], "seq": [0, 0]}, schema=schema))
    write_batches(
        tmp_path / "in",
        [[{"t": "inv.mine", "id": 1, "v": "a", "seq": 1, "k": "+I"},
          {"t": "inv.ledger", "id": None, "v": None, "seq": 2, "k": "-T"}]],
    )  # fmt: skip
    sink = rows_sink(catalog, tmp_path, namespaces=["inv"], create_tables=True)
    with pytest.raises(
        Exception, match=r"names table inv\.ledger, which this sink neither created"
    ):
        run_sink(spark, tmp_path / "in", ROWS_SCHEMA, sink)
    assert catalog.load_table("inv.ledger").scan().to_arrow().num_rows == 2
    assert not catalog.table_exists("inv.mine")
    shutil.rmtree(tmp_path / "chk")
    sink = rows_sink(
        catalog, tmp_path, namespaces=["inv"], tables=["inv.ledger"], create_tables=True
    )
    run_sink(spark, tmp_path / "in", ROWS_SCHEMA, sink)
    assert catalog.load_table("inv.ledger").scan().to_arrow().num_rows == 0
    assert catalog.load_table("inv.mine").scan().to_arrow().column("v").to_pylist() == ["a"]
