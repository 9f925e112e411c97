"""CDC streams: Debezium envelopes upserted (and changelogged) into tables, plain upsert
rows, and bad change events that stop the query until the input is fixed."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_rows
from streams import write_batches

import stream_sink as ss
from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, IcebergSink, from_debezium
from stream_sink.table.catalog import Catalog

ORDERS = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("status", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
ROW_SCHEMA = "order_id long, created_at timestamp, status string, amount double"
DAY = "2024-05-0{}T10:00:00Z"


def order(i: int, status: str, amount: float) -> dict[str, Any]:
    return {"order_id": i, "created_at": DAY.format(1 + i % 3), "status": status, "amount": amount}


def event(op: str, lsn: int, before: dict | None, after: dict | None, wrap: bool = False) -> dict:
    body = {
        "op": op,
        "before": before,
        "after": after,
        "source": {"lsn": lsn, "db": "shop"},
        "ts_ms": 1_700_000_000_000 + lsn,
    }
    return {"schema": {"type": "struct"}, "payload": body} if wrap else body


def orders_catalog(tmp_path: Path) -> Catalog:
    catalog = ss.load_catalog("cdc", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    return catalog


def text_stream(spark: Any, source: Path) -> Any:
    return spark.readStream.option("maxFilesPerTrigger", 1).text(str(source))


def run_query(df: Any, foreach: Any, checkpoint: str) -> None:
    q = (
        df.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()


def write_events(source: Path, batches: list[list[dict]], first: int = 0) -> None:
    # Debezium events are JSON lines; write_batches writes each dict as one line
    write_batches(source, batches, first)


def rows_of(catalog: Catalog, name: str) -> list[tuple]:
    t = catalog.load_table(name).scan().to_arrow()
    return sorted(
        zip(*(t.column(c).to_pylist() for c in ("order_id", "status", "amount")), strict=True)
    )


@pytest.mark.parametrize("format_version", [2, 3], ids=["v2", "v3"])
def test_debezium_upsert_and_changelog_with_updates_and_deletes_within_and_across_batches(
    spark: Any, tmp_path: Path, format_version: int
) -> None:
    catalog = orders_catalog(tmp_path)
    key = ["order_id", "created_at"]
    catalog.create_table(
        "db.orders_upsert",
        schema=ORDERS,
        identifier_fields=key,
        partition_spec=[("day", "created_at"), ("bucket", "order_id", 4)],
        format_version=format_version,
    )
    catalog.create_table(
        "db.orders_log", schema=ORDERS, identifier_fields=key, format_version=format_version
    )
    o = order
    batches = [
        [
            event("r", 1, None, o(1, "new", 10.0)),
            event("c", 2, None, o(2, "new", 20.0)),
            event("u", 3, o(1, "new", 10.0), o(1, "paid", 10.0)),
            event("c", 4, None, o(3, "new", 30.0)),
            event("d", 5, o(3, "new", 30.0), None),
            event("u", 6, o(1, "paid", 10.0), o(1, "shipped", 10.0), wrap=True),
        ],
        [
            event("u", 7, o(2, "new", 20.0), o(2, "paid", 25.0)),
            event("d", 8, o(1, "shipped", 10.0), None),
            event("c", 9, None, o(1, "new", 11.0)),
            event("c", 10, None, o(4, "new", 40.0)),
            event("u", 11, o(4, "new", 40.0), o(4, "paid", 41.0)),
        ],
    ]
    write_events(tmp_path / "in", batches)
    changes = from_debezium(
        text_stream(spark, tmp_path / "in"), row_schema=ROW_SCHEMA, order_by="source.lsn"
    )
    common = {
        "catalog": catalog,
        "row_kind_column": ROW_KIND_COLUMN,
        "order_by": ORDER_COLUMN,
        "state_dir": str(tmp_path / "state"),
    }
    spark_checkpoint = str(tmp_path / "spark-checkpoint")
    sinks = [
        IcebergSink(
            table="db.orders_upsert",
            mode="upsert",
            distribution="hash",
            checkpoint_location=str(tmp_path / "chk-u"),
            spark_checkpoint_location=spark_checkpoint,
            **common,
        ),
        IcebergSink(
            table="db.orders_log",
            mode="changelog",
            checkpoint_location=str(tmp_path / "chk-c"),
            spark_checkpoint_location=spark_checkpoint,
            **common,
        ),
    ]

    def both(df: Any, batch_id: int) -> None:
        df.persist()
        try:
            for sink in sinks:
                sink.foreach_batch(df, batch_id)
        finally:
            df.unpersist()

    try:
        run_query(changes, both, spark_checkpoint)
    finally:
        for sink in sinks:
            sink.close()
    expected = [(1, "new", 11.0), (2, "paid", 25.0), (4, "paid", 41.0)]
    for name in ("db.orders_upsert", "db.orders_log"):
        assert rows_of(catalog, name) == expected, name
        table = catalog.load_table(name)
        duck = sorted(
            (r["order_id"], r["status"], r["amount"]) for r in duckdb_rows(table.metadata_location)
        )
        assert duck == expected, name
        assert len(table.snapshots()) == 2
    first = catalog.load_table("db.orders_upsert")
    after_first = first.scan(snapshot_id=first.snapshots()[0].snapshot_id).to_arrow()
    assert sorted(after_first.column("status").to_pylist()) == ["new", "shipped"]
    created = first.scan().to_arrow().column("created_at").to_pylist()
    assert datetime(2024, 5, 2, 10, tzinfo=timezone.utc) in created
    formats = {
        d.file_format.value
        for name in ("db.orders_upsert", "db.orders_log")
        for s in catalog.load_table(name).snapshots()
        for d in _position_deletes(catalog.load_table(name), s)
    }
    assert formats == ({"PUFFIN"} if format_version == 3 else {"PARQUET"})  # vectors on v3


def _position_deletes(table: Any, snapshot: Any) -> list[Any]:
    from stream_sink.maintenance.inventory import inventory
    from stream_sink.table.manifest import DataFileContent

    found = [e.data_file for e in inventory(table, snapshot).deletes]
    return [d for d in found if d.content == DataFileContent.POSITION_DELETES]


def test_upsert_without_row_kind_column_replaces_each_key(spark: Any, tmp_path: Path) -> None:
    catalog = orders_catalog(tmp_path)
    catalog.create_table("db.latest", schema=ORDERS, identifier_fields=["order_id"])
    write_batches(
        tmp_path / "in",
        [
            [
                {**order(1, "new", 1.0), "seq": 1},
                {**order(2, "new", 2.0), "seq": 2},
                {**order(1, "paid", 1.5), "seq": 3},
            ],
            [{**order(2, "paid", 2.5), "seq": 4}, {**order(3, "new", 3.0), "seq": 5}],
        ],
    )
    sink = IcebergSink(
        catalog=catalog,
        table="db.latest",
        mode="upsert",
        order_by="seq",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    df = (
        spark.readStream.schema(f"{ROW_SCHEMA}, seq long")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
    )
    try:
        run_query(df, sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()
    assert rows_of(catalog, "db.latest") == [(1, "paid", 1.5), (2, "paid", 2.5), (3, "new", 3.0)]


def test_bad_debezium_events_stop_the_query_and_a_fixed_restart_is_exactly_once(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    catalog = orders_catalog(tmp_path)
    catalog.create_table("db.o", schema=ORDERS, identifier_fields=["order_id", "created_at"])
    source = tmp_path / "in"
    good = [event("c", 1, None, order(1, "new", 1.0))]
    unknown = [event("x", 2, None, order(2, "new", 2.0))]
    write_events(source, [good, unknown])

    def run() -> None:
        sink = IcebergSink(
            catalog=catalog,
            table="db.o",
            mode="upsert",
            row_kind_column=ROW_KIND_COLUMN,
            order_by=ORDER_COLUMN,
            checkpoint_location=str(tmp_path / "chk"),
            state_dir=str(tmp_path / "state"),
        )
        df = from_debezium(text_stream(spark, source), row_schema=ROW_SCHEMA)
        try:
            run_query(df, sink.foreach_batch, sink.spark_checkpoint_location)
        finally:
            sink.close()

    with pytest.raises(StreamingQueryException, match=r"UnknownRowKindError.*op=x"):
        run()
    assert rows_of(catalog, "db.o") == [(1, "new", 1.0)]

    (source / "batch-00001.json").write_text("{not json\n")
    with pytest.raises(StreamingQueryException, match=r"ValidationError.*malformed Debezium"):
        run()
    assert rows_of(catalog, "db.o") == [(1, "new", 1.0)]

    fixed = [
        event("c", 2, None, order(2, "new", 2.0)),
        event("u", 3, order(1, "new", 1.0), order(1, "paid", 1.0)),
    ]
    (source / "batch-00001.json").write_text("".join(json.dumps(e) + "\n" for e in fixed))
    run()
    assert rows_of(catalog, "db.o") == [(1, "paid", 1.0), (2, "new", 2.0)]
    assert len(catalog.load_table("db.o").snapshots()) == 2
