"""Which columns are the sink's own: one rule (``stream_sink.spark.cdc.control_columns``) for
routed tables, schema evolution and Delta tables. A user's order column is data; the
routing column, the row kind column and ``from_debezium``'s columns are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.exceptions import TransactionMetadataError
from stream_sink.spark import IcebergSink
from stream_sink.spark.cdc.control_columns import (
    MARK,
    TRANSACTION_COLUMNS,
    check_columns,
    control_columns,
    data_columns,
)


def _schema(*fields: StructField) -> StructType:
    return StructType(list(fields))


def test_order_columns_are_data_and_the_sinks_columns_are_not() -> None:
    schema = _schema(
        StructField("_table", StringType()),
        StructField("id", LongType()),
        StructField("seq", LongType()),
        StructField("kind", StringType()),
        StructField("_cdc_order", StringType()),
        StructField("_cdc_key_fields", StringType()),
        StructField("pos", LongType(), metadata={MARK: "pos"}),
        StructField("renamed", LongType(), metadata={MARK: "_cdc_order"}),
    )
    control = control_columns(schema, row_kind_column="kind", table_column="_table")
    assert control == {"_table", "kind", "_cdc_order", "_cdc_key_fields", "pos"}
    assert data_columns(schema, row_kind_column="kind", table_column="_table") == (
        "id",
        "seq",
        "renamed",
    )


def test_from_debezium_marks_its_columns(spark: Any) -> None:
    from stream_sink.spark.cdc.debezium import from_debezium

    df = spark.createDataFrame(
        [('{"op": "c", "after": {"id": 1}, "source": {"lsn": 1}}', '{"id": 1}')],
        "value string, key string",
    )
    out = from_debezium(df, row_schema="id long", order_column="pos", key_column="key")
    assert set(control_columns(out.schema)) == {"_row_kind", "pos", "_cdc_key_fields"}
    assert data_columns(out.schema) == ("id",)


def test_a_routed_stream_keeps_its_order_column_as_data(spark: Any, tmp_path: Path) -> None:
    """``seq`` orders the changes and is the user's column: every routed table the sink
    creates holds it (the single-table sink keeps it too); the routing and row kind
    columns are not written."""
    rows = [
        {"t": "db.a", "id": 1, "v": "x", "seq": 1, "k": "+I"},
        {"t": "db.b", "id": 7, "v": "y", "seq": 2, "k": "+I"},
        {"t": "db.a", "id": 1, "v": "z", "seq": 3, "k": "+U"},
    ]
    write_batches(tmp_path / "in", [rows])
    catalog = ss.load_catalog("cols", type="hadoop", warehouse=str(tmp_path / "wh"))
    sink = IcebergSink(
        catalog=catalog,
        table_column="t",
        namespaces=["db"],
        create_tables=True,
        table_template=dict(identifier_fields=["id"]),
        mode="upsert",
        row_kind_column="k",
        order_by="seq",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    schema = "t string, id long, v string, seq long, k string"
    try:
        run_available(
            spark, tmp_path / "in", schema, sink.foreach_batch, sink.spark_checkpoint_location
        )
    finally:
        sink.close()
    got = {n: catalog.load_table(n).scan().to_arrow() for n in ("db.a", "db.b")}
    assert {n: t.column_names for n, t in got.items()} == {
        "db.a": ["id", "v", "seq"],
        "db.b": ["id", "v", "seq"],
    }
    assert got["db.a"].to_pylist() == [{"id": 1, "v": "z", "seq": 3}]
    assert got["db.b"].to_pylist() == [{"id": 7, "v": "y", "seq": 2}]


def test_transaction_columns_reach_only_a_sink_that_holds_transactions() -> None:
    """No Spark: the check reads the schema only."""
    held = _schema(
        *(StructField(c, StringType()) for c in TRANSACTION_COLUMNS), StructField("id", LongType())
    )
    plain = _schema(StructField("id", LongType()))
    check_columns(held, gate=True)
    check_columns(plain, gate=False)
    with pytest.raises(TransactionMetadataError, match="pass transactions='debezium'"):
        check_columns(held, gate=False)
    with pytest.raises(TransactionMetadataError, match="lacks _transaction_id"):
        check_columns(_schema(*held.fields[1:]), gate=True)
    assert control_columns(held) == frozenset(TRANSACTION_COLUMNS)
