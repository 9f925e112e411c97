"""The streaming sink upserting into a table whose files have no field ids (added with
pyiceberg's ``add_files``, read through the table's name mapping): keys of imported
rows and of rows the sink wrote are replaced exactly once, and our scan, DuckDB and
pyiceberg (after equality deletes are converted, which it needs) read the same rows.
Java reads the same shape in tests/interop/test_iceberg_conformance.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from readers import duckdb_rows
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.spark import IcebergSink

pyiceberg_sql = pytest.importorskip("pyiceberg.catalog.sql")
from pyiceberg.schema import Schema as PySchema  # noqa: E402
from pyiceberg.types import LongType, NestedField, StringType, StructType  # noqa: E402

PY_SCHEMA = PySchema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "profile", StructType(NestedField(4, "email", StringType()))),
    identifier_field_ids=[1],
)


def rows(read: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["name"], (r["profile"] or {}).get("email")) for r in read)


def test_the_sink_upserts_into_an_add_files_table(spark: Any, tmp_path: Path) -> None:
    uri, warehouse = f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh"
    py = pyiceberg_sql.SqlCatalog("imp", uri=uri, warehouse=f"file://{warehouse}")
    py.create_namespace("db")
    imported = py.create_table("db.t", PY_SCHEMA)
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "name": ["a", "b", "c"],
            "profile": [{"email": f"{i}@old"} for i in (1, 2, 3)],
        },
        schema=pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                ("name", pa.string()),
                ("profile", pa.struct([("email", pa.string())])),
            ]
        ),
    )
    pq.write_table(data, tmp_path / "imported.parquet")  # no field ids
    imported.add_files([f"file://{tmp_path / 'imported.parquet'}"])

    catalog = ss.load_catalog("imp", type="sql", uri=uri, warehouse=str(warehouse))
    write_batches(
        tmp_path / "in",
        [
            [
                {"id": 1, "name": "a2", "profile": {"email": "1@new"}, "seq": 1},
                {"id": 10, "name": "x", "profile": None, "seq": 2},
            ],
            [{"id": 10, "name": "x2", "profile": {"email": "10@new"}, "seq": 3}],
        ],
    )
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        mode="upsert",
        order_by="seq",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    schema = "id long, name string, profile struct<email: string>, seq long"
    try:
        run_available(
            spark, tmp_path / "in", schema, sink.foreach_batch, sink.spark_checkpoint_location
        )
    finally:
        sink.close()

    want = [(1, "a2", "1@new"), (2, "b", "2@old"), (3, "c", "3@old"), (10, "x2", "10@new")]
    table = catalog.load_table("db.t")
    assert rows(table.scan().to_arrow().to_pylist()) == want
    assert rows(duckdb_rows(table.metadata_location.removeprefix("file://"))) == want
    table.maintenance.convert_equality_deletes()
    location = catalog.load_table("db.t").metadata_location
    assert rows(py.load_table("db.t").scan().to_arrow().to_pylist()) == want
    assert rows(duckdb_rows(location.removeprefix("file://"))) == want
