"""Tables written by pyiceberg (appends, copy-on-write deletes, overwrites, schema
evolution, partitioning) read by our scan: rows equal pyiceberg's and DuckDB's at
every snapshot, columns resolved by field id across renames and added columns."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from read_support import duckdb_rows_at, rows_of, sort_rows
from readers import duckdb_connection

import stream_sink as ss
from stream_sink.read import IncrementalAppendScan, col

pyiceberg_sql = pytest.importorskip("pyiceberg.catalog.sql")
from pyiceberg.expressions import EqualTo  # noqa: E402
from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.transforms import BucketTransform, DayTransform  # noqa: E402
from pyiceberg.types import (  # noqa: E402
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "qty", IntegerType()),
    NestedField(4, "price", DoubleType()),
    NestedField(5, "ts", TimestampType()),
)
SPEC = PartitionSpec(
    PartitionField(source_id=5, field_id=1000, transform=DayTransform(), name="ts_day"),
    PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_bucket"),
)
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.float64()),
        pa.field("ts", pa.timestamp("us")),
    ]
)


def _rows(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "id": list(ids),
            "name": [f"n{i}" if i % 5 else None for i in ids],
            "qty": pa.array([i % 17 for i in ids], pa.int32()),
            "price": [i * 0.5 for i in ids],
            "ts": [dt.datetime(2024, 3, 1) + dt.timedelta(hours=i) for i in ids],
        },
        schema=ARROW,
    )


@pytest.fixture
def written(tmp_path: Path):
    """A pyiceberg table with appends, a delete, an overwrite and schema changes."""
    uri = f"sqlite:///{tmp_path}/catalog.db"
    warehouse = str(tmp_path / "wh")
    py = pyiceberg_sql.SqlCatalog("shared", uri=uri, warehouse=f"file://{warehouse}")
    py.create_namespace("db")
    t = py.create_table("db.t", schema=SCHEMA, partition_spec=SPEC)
    t.append(_rows(0, 60))
    t.append(_rows(60, 40))
    t.delete(EqualTo("qty", 3))
    t.overwrite(_rows(200, 5), overwrite_filter=EqualTo("id", 7))
    with t.update_schema() as update:
        update.rename_column("name", "label")
        update.update_column("qty", field_type=LongType())
        update.add_column("note", StringType())
    t = py.load_table("db.t")
    more = _rows(300, 10).rename_columns(["id", "label", "qty", "price", "ts"])
    more = more.set_column(2, "qty", more.column("qty").cast(pa.int64()))
    more = more.append_column("note", pa.array([f"x{i}" for i in range(10)]))
    t.append(more)
    ours = ss.load_catalog("shared", type="sql", uri=uri, warehouse=warehouse)
    return py.load_table("db.t"), ours.load_table("db.t")


def test_rows_equal_pyiceberg_and_duckdb_at_every_snapshot(written) -> None:
    py, ours = written
    assert len(ours.snapshots()) >= 5
    con = duckdb_connection()
    for snap in ours.snapshots():
        mine = rows_of(ours.scan(snapshot_id=snap.snapshot_id).to_arrow(), "id")
        theirs = rows_of(py.scan(snapshot_id=snap.snapshot_id).to_arrow(), "id")
        assert mine == theirs, f"pyiceberg differs at {snap.snapshot_id} ({snap.operation})"
        duck = sort_rows(duckdb_rows_at(ours.metadata_location, snap.snapshot_id, con), "id")
        assert mine == duck, f"DuckDB differs at {snap.snapshot_id} ({snap.operation})"


def test_columns_resolve_by_field_id_after_evolution(written) -> None:
    _, ours = written
    out = ours.scan().to_arrow()
    assert out.schema.names == ["id", "label", "qty", "price", "ts", "note"]
    assert out.schema.field("qty").type == pa.int64()
    by_id = {r["id"]: r for r in out.to_pylist()}
    assert by_id[1]["label"] == "n1" and by_id[1]["note"] is None  # old file, renamed column
    assert by_id[5]["label"] is None
    assert by_id[301]["note"] == "x1" and by_id[301]["qty"] == 301 % 17
    assert 7 not in by_id and all(r["qty"] != 3 for r in by_id.values() if r["id"] < 100)


def test_filters_on_renamed_and_promoted_columns(written) -> None:
    py, ours = written
    mine = ours.scan(row_filter=(col("label") == "n12") | (col("qty") >= 16), columns=["id"])
    theirs = py.scan(row_filter="label == 'n12' or qty >= 16", selected_fields=("id",))
    assert sorted(mine.to_arrow().column("id").to_pylist()) == sorted(
        theirs.to_arrow().column("id").to_pylist()
    )
    assert mine.count() == len(theirs.to_arrow())


def test_time_travel_uses_the_snapshot_schema(written) -> None:
    _, ours = written
    first = ours.snapshots()[0]
    old = ours.scan(snapshot_id=first.snapshot_id).to_arrow()
    assert old.schema.names == ["id", "name", "qty", "price", "ts"]
    assert old.num_rows == 60


def test_incremental_append_scan_over_pyiceberg_history(written) -> None:
    _, ours = written
    snaps = ours.snapshots()
    out = IncrementalAppendScan(ours, snaps[0].snapshot_id, snaps[-1].snapshot_id).to_arrow()
    # the second append, the append half of pyiceberg's overwrite, and the last append;
    # the delete and the deleting half of the overwrite are not appends
    expected = [*range(60, 100), *range(200, 205), *range(300, 310)]
    assert sorted(out.column("id").to_pylist()) == expected
