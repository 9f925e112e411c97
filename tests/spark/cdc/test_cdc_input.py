"""Quiet surprises in CDC input made explicit: null order values and null keys are
refused naming the batch and the input row; ties keep input order, whether the batch is
ordered in its one task or shuffled by key; Debezium updates
without a before image retract the old row in changelog mode; Kafka tombstones delete
their key.

Tests stream_sink.spark.cdc.guard: null keys and order values refused, naming the row.
Tests stream_sink.spark.cdc.ordering: a batch read in one task, checked and ordered there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from streams import write_batches
from test_cdc import ORDERS, ROW_SCHEMA, event, order, orders_catalog, rows_of, run_query

from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, IcebergSink, from_debezium


def _sink(catalog: Any, tmp_path: Path, table: str, **options: Any) -> IcebergSink:
    return IcebergSink(
        catalog=catalog,
        table=table,
        checkpoint_location=str(tmp_path / table),
        state_dir=str(tmp_path / "state"),
        **options,
    )


def _run(spark: Any, sink: IcebergSink, df: Any) -> None:
    try:
        run_query(df, sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()


def test_null_order_value_and_null_key_are_refused_naming_batch_and_input_row(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    catalog = orders_catalog(tmp_path)
    catalog.create_table("db.o", schema=ORDERS, identifier_fields=["order_id"])
    source = tmp_path / "in"
    second = [{**order(2, "new", 2.0), "seq": 2}, {**order(3, "odd", 3.0)}]
    write_batches(source, [[{**order(1, "new", 1.0), "seq": 1}], second])
    df = (
        spark.readStream.schema(f"{ROW_SCHEMA}, seq long")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
    )
    with pytest.raises(StreamingQueryException) as e:
        _run(spark, _sink(catalog, tmp_path, "db.o", mode="upsert", order_by="seq"), df)
    text = str(e.value)
    assert "ValidationError: batch 1: order column 'seq' is null in input row" in text
    assert '"status":"odd"' in text and "at row 0" not in text
    assert rows_of(catalog, "db.o") == [(1, "new", 1.0)]

    (source / "batch-00001.json").write_text(
        json.dumps({**order(2, "new", 2.0), "seq": 2, "order_id": None}) + "\n"
    )
    for stream in (df, df.repartition(2)):  # checked in the one task, or before the shuffle
        with pytest.raises(
            StreamingQueryException,
            match=r"NullKeyError: batch 1: equality field 'order_id' is null in "
            r"input row \{.*\"seq\":2",
        ):
            _run(spark, _sink(catalog, tmp_path, "db.o", mode="upsert", order_by="seq"), stream)


def test_ties_in_order_values_keep_input_order_and_are_counted(spark: Any, tmp_path: Path) -> None:
    catalog = orders_catalog(tmp_path)
    catalog.create_table("db.t", schema=ORDERS, identifier_fields=["order_id"])
    rows = [{**order(1, s, 1.0), "seq": 7} for s in ("first", "second", "last")]
    write_batches(tmp_path / "in", [rows])
    df = (
        spark.readStream.schema(f"{ROW_SCHEMA}, seq long")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
    )
    sink = _sink(catalog, tmp_path, "db.t", mode="upsert", order_by="seq")
    _run(spark, sink, df)
    assert rows_of(catalog, "db.t") == [(1, "last", 1.0)]
    assert sink.metrics_snapshot().writer.cdc_order_ties == 2


def test_debezium_update_without_before_image_and_kafka_tombstones(
    spark: Any, tmp_path: Path
) -> None:
    """Kafka records as (key, value) JSON strings: an update without a before image (the
    default replica identity) in changelog mode, and tombstones (null values) for a key
    deleted earlier and for a key whose delete event was compacted away. A tombstone's
    row holds only the key, so the table's other columns must be optional."""
    catalog = orders_catalog(tmp_path)
    nullable = pa.schema([f if f.name == "order_id" else f.with_nullable(True) for f in ORDERS])
    catalog.create_table("db.log", schema=nullable, identifier_fields=["order_id"])

    def record(key: int, value: dict | None) -> dict:
        return {
            "key": json.dumps({"order_id": key}),
            "value": None if value is None else json.dumps(value),
        }

    o = order
    write_batches(
        tmp_path / "in",
        [
            [
                record(1, event("c", 1, None, o(1, "new", 1.0))),
                record(2, event("c", 2, None, o(2, "new", 2.0))),
                record(3, event("c", 3, None, o(3, "new", 3.0))),
            ],
            [
                record(1, event("u", 4, None, o(1, "paid", 1.5))),  # no before image
                record(3, event("d", 5, o(3, "new", 3.0), None)),
                record(3, None),
                record(2, None),
            ],  # the delete of 2 was compacted away: only its tombstone is left
        ],
    )
    kafka = (
        spark.readStream.schema("key string, value string")
        .option("maxFilesPerTrigger", 1)
        .json(str(tmp_path / "in"))
    )
    changes = from_debezium(kafka, row_schema=ROW_SCHEMA, order_by="source.lsn")
    sink = _sink(
        catalog,
        tmp_path,
        "db.log",
        mode="changelog",
        row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN,
    )
    _run(spark, sink, changes)
    assert rows_of(catalog, "db.log") == [(1, "paid", 1.5)]


def test_a_batch_read_in_one_task_and_a_shuffled_batch_give_the_same_table(
    spark: Any, tmp_path: Path
) -> None:
    """A small batch Spark reads in one partition is ordered inside its task (no
    shuffle); a batch read in two partitions (two files per trigger) is shuffled by key.
    Updates, deletes, re-inserts and ties give the same rows and tie counts either way."""
    from stream_sink.spark.foreach_batch.single_task import runs_in_one_task

    catalog = orders_catalog(tmp_path)
    first = [{**order(i, "new", float(i)), "seq": i, "kind": "+I"} for i in range(1, 7)]
    second = [
        {**order(2, "paid", 2.5), "seq": 9, "kind": "+U"},
        {**order(3, "gone", 3.0), "seq": 8, "kind": "-D"},
        {**order(2, "tie-a", 2.6), "seq": 10, "kind": "+U"},
        {**order(2, "tie-b", 2.7), "seq": 10, "kind": "+U"},
        {**order(4, "gone", 4.0), "seq": 11, "kind": "-D"},
        {**order(4, "back", 4.5), "seq": 12, "kind": "+I"},
        {**order(7, "new", 7.0), "seq": 13, "kind": "+I"},
    ]
    source = tmp_path / "in"
    write_batches(source, [first[:3], first[3:], second[:4], second[4:]])
    schema = f"{ROW_SCHEMA}, seq long, kind string"
    files = sorted(str(p) for p in source.glob("*.json"))
    assert runs_in_one_task(spark.read.schema(schema).json(files[0]))
    assert not runs_in_one_task(spark.read.schema(schema).json(files[0]), max_bytes=0)
    assert not runs_in_one_task(spark.read.schema(schema).json(files[:2]))
    expected = [
        (1, "new", 1.0),
        (2, "tie-b", 2.7),
        (4, "back", 4.5),
        (5, "new", 5.0),
        (6, "new", 6.0),
        (7, "new", 7.0),
    ]
    for name, files_per_batch in (("db.one", 1), ("db.spread", 2)):
        stream = (
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", files_per_batch)
            .json(str(source))
        )
        catalog.create_table(name, schema=ORDERS, identifier_fields=["order_id"])
        sink = _sink(catalog, tmp_path, name, mode="upsert", row_kind_column="kind", order_by="seq")
        _run(spark, sink, stream)
        assert rows_of(catalog, name) == expected, name
        assert sink.metrics_snapshot().writer.cdc_order_ties == 1, name
