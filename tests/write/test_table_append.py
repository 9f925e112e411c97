"""``table.append``: what DuckDB and pyiceberg read back, pruning by our bounds, bad input."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from readers import comparable, duckdb_query, duckdb_rows, pyiceberg_rows, pyiceberg_table

from stream_sink.exceptions import SchemaMismatchError
from stream_sink.table.catalog import Catalog
from stream_sink.tables import IcebergTable

ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("amount", pa.decimal128(10, 2)),
        ("score", pa.float64()),
        ("n", pa.int32()),
    ]
)


def rows(start: int, n: int) -> pa.Table:
    base = datetime(1969, 12, 25, 23, 30)
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": [i - 50 for i in ids],
            "name": [None if i % 13 == 0 else f"név-{i % 7}" for i in ids],
            "ts": [None if i % 17 == 0 else base + timedelta(minutes=37 * i) for i in ids],
            "tz": [datetime(2024, 1, 1, tzinfo=timezone.utc) - timedelta(days=i) for i in ids],
            "day": [
                None if i % 19 == 0 else date(1969, 12, 30) + timedelta(days=i % 5) for i in ids
            ],
            "amount": [Decimal(i * 37 % 1000 - 500) / 100 for i in ids],
            "score": [float("nan") if i % 23 == 0 else i / 7 for i in ids],
            "n": [None if i % 5 == 0 else i % 3 - 1 for i in ids],
        },
        schema=ARROW,
    )


def same(got: list[dict[str, Any]], expected: pa.Table) -> None:
    """Row for row, NaN equal to NaN, whatever the order."""
    assert comparable(got, "id") == comparable(expected.to_pylist(), "id")


def read_back(table: IcebergTable, expected: pa.Table) -> None:
    same(duckdb_rows(table.metadata_location), expected)
    same(pyiceberg_rows(table.metadata_location), expected)


def test_load_catalog_returns_the_appendable_table(catalog: Catalog) -> None:
    catalog.create_table("db.t", ARROW)
    assert isinstance(catalog.load_table("db.t"), IcebergTable)


def test_unpartitioned_append_reads_back(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW)
    assert isinstance(table, IcebergTable)
    table.append(rows(0, 300))
    table.append(rows(300, 200).to_batches())
    read_back(table, pa.concat_tables([rows(0, 300), rows(300, 200)]))


SPECS = {
    "identity": [("identity", "name")],
    "bucket": [("bucket", "id", 8)],
    "day": [("day", "ts")],
    "truncate": [("truncate", "name", 3)],
    "truncate-decimal": [("truncate", "amount", 50)],
    "month-tz": [("month", "tz")],
    "identity-date-int": [("identity", "day"), ("identity", "n")],
    "several": [("day", "ts"), ("bucket", "id", 2), ("truncate", "n", 2)],
}


@pytest.mark.parametrize("name", list(SPECS))
def test_partitioned_append_reads_back(catalog: Catalog, name: str) -> None:
    table = catalog.create_table("db.t", ARROW, partition_spec=SPECS[name])
    assert isinstance(table, IcebergTable)
    table.append(rows(0, 400))
    table.append(rows(400, 100))
    read_back(table, rows(0, 500))


def test_nulls_in_partition_columns_get_their_own_partition(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t", ARROW, partition_spec=[("identity", "name"), ("day", "ts")]
    )
    assert isinstance(table, IcebergTable)
    table.append(rows(0, 300))
    files = pyiceberg_table(table.metadata_location).inspect.files().to_pylist()
    partitions = [tuple(f["partition"].values()) for f in files]
    assert any(p[0] is None for p in partitions) and any(p[1] is None for p in partitions)
    null_name = duckdb_query(table.metadata_location, "name IS NULL")
    assert sorted(r["id"] for r in null_name) == sorted(
        r["id"] for r in rows(0, 300).to_pylist() if r["name"] is None
    )
    read_back(table, rows(0, 300))


def test_partition_values_match_each_files_rows(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW, partition_spec=[("bucket", "id", 4), ("day", "ts")])
    assert isinstance(table, IcebergTable)
    table.append(rows(0, 500))
    theirs = pyiceberg_table(table.metadata_location)
    for task in theirs.scan().plan_files():
        f = task.file
        spec = theirs.spec()
        for field, value in zip(spec.fields, f.partition, strict=True):
            source = theirs.schema().find_field(field.source_id)
            col = pa.parquet.read_table(f.file_path.removeprefix("file:")).column(source.name)
            transform = field.transform.pyarrow_transform(source.field_type)
            assert set(transform(col).to_pylist()) == {value}


def far_rows() -> pa.Table:
    """Rows whose every bounded column lies outside the range of ``rows(0, 100)``."""
    far = rows(100_000, 100)
    names = pa.array([f"zz-{i}" for i in range(100)])
    amounts = pa.array([Decimal(10_000 + i) for i in range(100)], pa.decimal128(10, 2))
    far = far.set_column(far.schema.get_field_index("name"), "name", names)
    return far.set_column(far.schema.get_field_index("amount"), "amount", amounts)


PRUNING_FILTERS = [
    # (DuckDB SQL, pyiceberg filter, the same on a Python row)
    ("id < 60", "id < 60", lambda r: r["id"] < 60),
    ("name < 'x'", "name < 'x'", lambda r: r["name"] is not None and r["name"] < "x"),
    (
        "ts < TIMESTAMP '1975-01-01'",
        "ts < '1975-01-01T00:00:00'",
        lambda r: r["ts"] is not None and r["ts"] < datetime(1975, 1, 1),
    ),
    (
        "tz > TIMESTAMPTZ '1999-01-01 00:00:00+00'",
        "tz > '1999-01-01T00:00:00+00:00'",
        lambda r: r["tz"] > datetime(1999, 1, 1, tzinfo=timezone.utc),
    ),
    ("amount < 9000", "amount < 9000", lambda r: r["amount"] < 9000),
]


def test_pruning_by_bounds_in_duckdb_and_pyiceberg(catalog: Catalog) -> None:
    """Our bounds let both readers skip the file they exclude, and never a file they need:
    after the far file is deleted, every query that prunes it still returns the right rows."""
    table = catalog.create_table("db.t", ARROW)
    assert isinstance(table, IcebergTable)
    near = rows(0, 100)
    table.append(near)
    table.append(far_rows())
    theirs = pyiceberg_table(table.metadata_location)
    all_files = {t.file.file_path for t in theirs.scan().plan_files()}
    for _, pyice, _ in PRUNING_FILTERS:
        planned = [t.file.file_path for t in theirs.scan(row_filter=pyice).plan_files()]
        assert len(planned) == 1, pyice
    (near_file,) = {t.file.file_path for t in theirs.scan(row_filter="id < 60").plan_files()}
    (far_file,) = all_files - {near_file}
    Path(far_file.removeprefix("file:")).unlink()
    for duck, _, keep in PRUNING_FILTERS:
        got = sorted(r["id"] for r in duckdb_query(table.metadata_location, duck))
        assert got == sorted(r["id"] for r in near.to_pylist() if keep(r)), duck
    with pytest.raises(duckdb.Error):  # an unpruned read does need the deleted file
        duckdb_query(table.metadata_location, "id > 60")


def test_snapshot_properties_and_branch(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW)
    assert isinstance(table, IcebergTable)
    main = table.append(rows(0, 10), snapshot_properties={"app.batch": "7"})
    assert main.summary["app.batch"] == "7"
    assert main.summary["added-records"] == "10"
    side = table.append(rows(10, 5), branch="audit")
    assert table.metadata.snapshot_for_ref("audit").snapshot_id == side.snapshot_id
    assert table.current_snapshot().snapshot_id == main.snapshot_id
    assert side.summary["total-records"] == "15"
    read_back(table, rows(0, 10))


def test_bad_input_leaves_no_file_and_no_snapshot(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW, partition_spec=[("identity", "name")])
    assert isinstance(table, IcebergTable)
    good = rows(0, 50).to_batches()
    bad = rows(50, 10).drop_columns(["id"]).to_batches()
    with pytest.raises(SchemaMismatchError, match="required column 'id' is missing"):
        table.append([*good, *bad])
    wrong_type = rows(0, 10).set_column(1, "name", pa.array(range(10), pa.int64()))
    with pytest.raises(SchemaMismatchError, match="'name'"):
        table.append(wrong_type)
    assert table.current_snapshot() is None
    data = Path(table.data_location)
    assert not data.exists() or [p for p in data.rglob("*") if p.is_file()] == []


def test_columns_in_another_order_and_missing_optional_ones(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW)
    assert isinstance(table, IcebergTable)
    data = rows(0, 20)
    table.append(data.select(["score", "id", "name"]))
    got = duckdb_rows(table.metadata_location)
    assert {r["id"] for r in got} == set(data.column("id").to_pylist())
    assert all(r["ts"] is None and r["amount"] is None for r in got)


def test_many_appends_read_back(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW, partition_spec=[("bucket", "id", 2)])
    assert isinstance(table, IcebergTable)
    for start in range(0, 200, 20):
        table.append(rows(start, 20))
    assert table.current_snapshot().summary["total-records"] == "200"
    read_back(table, rows(0, 200))


def test_scan_reads_what_append_wrote(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW, partition_spec=[("bucket", "id", 4)])
    assert isinstance(table, IcebergTable)
    first = table.append(rows(0, 50))
    table.append(rows(50, 30))
    assert comparable(table.scan().to_arrow().to_pylist(), "id") == comparable(
        rows(0, 80).to_pylist(), "id"
    )
    old = table.scan(snapshot_id=first.snapshot_id).to_arrow()
    assert sorted(old.column("id").to_pylist()) == sorted(rows(0, 50).column("id").to_pylist())
