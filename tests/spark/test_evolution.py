"""Schema evolution while streaming (``IcebergSink(schema_evolution=...)``): later batches
add a column, widen a type and bring nulls into a required column; the schema change is
committed before the batch's data, a replay does not apply it twice, and bad changes stop
the query naming the column, both types and the option that would allow them.

Tests stream_sink.spark.evolution: schema evolution driven by the stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.exceptions import IncompatibleSchemaChangeError, SchemaMismatchError
from stream_sink.spark import IcebergSink
from stream_sink.table.catalog import Catalog
from stream_sink.table.types import LongType

SOURCE = "id long, n long, must string, note string"
TABLE = pa.schema(
    [
        pa.field("id", pa.int64(), False),
        pa.field("n", pa.int32()),
        pa.field("must", pa.string(), False),
    ]
)


def shaped(df: Any, batch_id: int) -> Any:
    """Batch 0: the table's shape; 1: adds ``note``; 2 and later: ``n`` as long."""
    from pyspark.sql import functions as F

    n = F.col("n").cast("long" if batch_id >= 2 else "int").alias("n")
    cols = [F.col("id"), n, F.col("must")] + ([F.col("note")] if batch_id >= 1 else [])
    return df.select(*cols)


def batches() -> list[list[dict[str, Any]]]:
    return [
        [{"id": i, "n": i, "must": f"m{i}"} for i in range(3)],
        [{"id": 3, "n": 3, "must": "m3", "note": "hello"}],
        [{"id": 4, "n": 2**40, "must": None, "note": "big"}],
    ]


def new_catalog(tmp_path: Path) -> Catalog:
    catalog = ss.load_catalog("evo", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=TABLE, identifier_fields=["id"])
    return catalog


def run(spark: Any, tmp_path: Path, catalog: Catalog, evolution: str) -> None:
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
        schema_evolution=evolution,
    )
    try:
        run_available(
            spark,
            tmp_path / "in",
            SOURCE,
            lambda df, b: sink.foreach_batch(shaped(df, b), b),
            sink.spark_checkpoint_location,
        )
    finally:
        sink.close()


def test_compatible_evolution_adds_widens_and_relaxes_before_the_data(
    spark: Any, tmp_path: Path
) -> None:
    catalog = new_catalog(tmp_path)
    write_batches(tmp_path / "in", batches())
    run(spark, tmp_path, catalog, "compatible")
    table = catalog.load_table("db.t")
    schema = table.schema()
    assert schema.column_names == ["id", "n", "must", "note"]
    assert schema.find_type("n") == LongType() and schema.find_field("must").optional
    assert schema.find_field("id").required
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["n"], r["must"], r["note"]) for r in rows] == [
        (0, "m0", None),
        (1, "m1", None),
        (2, "m2", None),
        (3, "m3", "hello"),
        (2**40, None, "big"),
    ]
    # every snapshot's schema has the columns its data files were written with
    meta = table.metadata
    for snap in table.snapshots():
        batch = int(snap.summary["stream-sink.max-committed-checkpoint-id"])
        names = meta.schema_by_id(snap.schema_id or 0).column_names
        assert ("note" in names) == (batch >= 1)
    # a replay (same query, same batches) changes nothing
    before = table.metadata_location
    run(spark, tmp_path, catalog, "compatible")
    assert catalog.load_table("db.t").metadata_location == before


def test_add_columns_refuses_a_widening_and_none_refuses_a_new_column(
    spark: Any, tmp_path: Path
) -> None:
    catalog = new_catalog(tmp_path)
    write_batches(tmp_path / "in", batches()[:2])
    with pytest.raises(Exception) as err:
        run(spark, tmp_path, catalog, "none")
    assert isinstance(err.value, SchemaMismatchError) or "SchemaMismatchError" in str(err.value)
    assert "'note'" in str(err.value) and "schema_evolution='add-columns'" in str(err.value)
    assert len(catalog.load_table("db.t").snapshots()) == 1  # batch 0 committed, 1 refused
    write_batches(tmp_path / "in", batches()[2:], first=2)
    with pytest.raises(Exception) as err2:
        run(spark, tmp_path, catalog, "add-columns")
    text = str(err2.value)
    assert "IncompatibleSchemaChangeError" in text or isinstance(
        err2.value, IncompatibleSchemaChangeError
    )
    assert "'n'" in text and "int" in text and "long" in text
    assert "schema_evolution='compatible'" in text
    table = catalog.load_table("db.t")
    assert table.schema().column_names == ["id", "n", "must", "note"]  # batch 1 went in
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3]


def test_java_adds_a_column_while_the_sink_keeps_writing(spark: Any, tmp_path: Path) -> None:
    from interop.conftest import java_available, sql_with_java
    from readers import duckdb_rows, pyiceberg_rows

    if not java_available():
        pytest.skip("the java-iceberg launcher is not available")
    catalog = new_catalog(tmp_path)
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )

    def foreach(df: Any, b: int) -> None:
        sink.foreach_batch(shaped(df, b), b)

    write_batches(tmp_path / "in", batches()[:1])
    run_available(spark, tmp_path / "in", SOURCE, foreach, sink.spark_checkpoint_location)
    sql_with_java(str(tmp_path / "wh"), ["ALTER TABLE hc.db.t ADD COLUMN note string"])
    write_batches(tmp_path / "in", batches()[1:2], first=1)  # carries the new column
    run_available(spark, tmp_path / "in", SOURCE, foreach, sink.spark_checkpoint_location)
    sink.close()  # the same sink and operator state throughout
    table = catalog.load_table("db.t")
    assert [s.schema_id for s in table.metadata.schemas] == [0, 1]  # Java's change only
    want = [(0, None), (1, None), (2, None), (3, "hello")]
    assert sorted((r["id"], r["note"]) for r in table.scan().to_arrow().to_pylist()) == want
    for reader in (duckdb_rows, pyiceberg_rows):
        assert sorted((r["id"], r["note"]) for r in reader(table.metadata_location)) == want
    marks = [s.summary["stream-sink.max-committed-checkpoint-id"] for s in table.snapshots()]
    assert marks == ["0", "1"]
