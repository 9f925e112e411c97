"""Schema and partition-spec evolution through ``table.update_schema()`` / ``update_spec()``:
new schema ids, ids never reused, old files read with their own schema, bad changes refused.

Tests stream_sink.table.schema_update: schema evolution.
Tests stream_sink.table.spec_update: partition spec evolution.
Tests stream_sink.table.promotion: the type promotions allowed."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import IncompatibleSchemaChangeError, ValidationError
from stream_sink.table.types import (
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
)
from stream_sink.tables import IcebergTable
from tests.readers import duckdb_rows, pyiceberg_rows


def base_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("n", pa.int32()),
            pa.field("x", pa.float32()),
            pa.field("price", pa.decimal128(9, 2)),
            pa.field("must", pa.string(), nullable=False),
            pa.field("addr", pa.struct([pa.field("city", pa.string())])),
        ]
    )


@pytest.fixture
def table(tmp_path: Path) -> IcebergTable:
    catalog = load_catalog("t", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", schema=base_schema(), identifier_fields=["id"])
    t.append(
        pa.table(
            {
                "id": [1, 2],
                "n": [10, 20],
                "x": [1.5, 2.5],
                "price": [Decimal("1.25"), Decimal("2.50")],
                "must": ["a", "b"],
                "addr": [{"city": "Oslo"}, None],
            },
            schema=base_schema(),
        )
    )
    return t


def test_evolution_reads_old_rows_with_the_new_schema(table: IcebergTable) -> None:
    before = table.schema()
    with table.update_schema() as u:
        u.add_column("note", "string")
        u.add_column("addr.zip", StringType())
        u.update_column("n", LongType())
        u.update_column("x", DoubleType())
        u.update_column("price", DecimalType(18, 2))
        u.make_column_optional("must")
        u.rename_column("addr", "address")
        u.move_first("note")
    after = table.schema()
    assert after.schema_id == before.schema_id + 1
    assert [s.schema_id for s in table.metadata.schemas] == [0, 1]
    # ids of existing columns kept; new ones above the old last-column-id
    for f in before.fields:
        assert after.find_field(f.field_id).field_type is not None
    assert after.find_field("note").field_id == before.highest_field_id + 1
    assert after.find_field("address.zip").field_id == before.highest_field_id + 2
    assert table.metadata.last_column_id == before.highest_field_id + 2
    assert after.column_names == ["note", "id", "n", "x", "price", "must", "address"]
    assert after.find_field("must").optional
    table.append(
        pa.table(
            {
                "note": ["new"],
                "id": [3],
                "n": [2**40],
                "x": [0.1],
                "price": [Decimal("123456789.01")],
                "must": pa.array([None], pa.string()),
                "address": [{"city": "Rome", "zip": "00100"}],
            }
        )
    )
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows[0] == {
        "note": None,
        "id": 1,
        "n": 10,
        "x": 1.5,
        "price": Decimal("1.25"),
        "must": "a",
        "address": {"city": "Oslo", "zip": None},
    }
    assert rows[1]["address"] is None and rows[1]["note"] is None
    assert rows[2]["n"] == 2**40 and rows[2]["must"] is None
    for reader in (duckdb_rows, pyiceberg_rows):
        got = sorted(reader(table.metadata_location), key=lambda r: r["id"])
        assert [r["note"] for r in got] == [None, None, "new"]
        assert [r["n"] for r in got] == [10, 20, 2**40]
        assert got[0]["address"]["city"] == "Oslo"


def test_union_by_name_adds_and_widens_and_is_idempotent(table: IcebergTable) -> None:
    data = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("n", pa.int64()),
            pa.field("extra", pa.int32()),
            pa.field(
                "addr",
                pa.struct(
                    [
                        pa.field("city", pa.string()),
                        pa.field("geo", pa.struct([pa.field("lat", pa.float64())])),
                    ]
                ),
            ),
        ]
    )
    with table.update_schema() as u:
        u.union_by_name(data)
    s = table.schema()
    assert s.find_type("n") == LongType()
    assert s.find_field("extra").optional
    assert isinstance(s.find_type("addr.geo"), StructType)
    assert s.find_field("id").required  # an identifier field is never relaxed
    location = table.metadata_location
    with table.update_schema() as u:
        u.union_by_name(data)  # nothing left to change: no commit
    assert table.metadata_location == location
    with table.update_schema() as u:
        u.union_by_name(pa.schema([pa.field("n", pa.int32())]))  # narrower data: stays long
    assert table.metadata_location == location


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda u: u.update_column("must", IntegerType()), ["'must'", "string", "int"]),
        (lambda u: u.update_column("n", StringType()), ["'n'", "int", "string"]),
        (
            lambda u: u.add_column("req", "long", required=True),
            ["'req'", "allow_incompatible_changes=True"],
        ),
        (
            lambda u: u.union_by_name(pa.schema([pa.field("x", pa.int32())])),
            ["'x'", "float", "int"],
        ),
        (lambda u: u.make_column_optional("id"), ["'id'", "identifier"]),
    ],
)
def test_incompatible_changes_are_refused_naming_the_column(
    table: IcebergTable, change: object, words: list[str]
) -> None:
    location = table.metadata_location
    with pytest.raises(IncompatibleSchemaChangeError) as err, table.update_schema() as u:
        change(u)  # type: ignore[operator]
    for w in words:
        assert w in str(err.value)
    assert table.refresh().metadata_location == location


def test_bad_paths_and_names(table: IcebergTable) -> None:
    u = table.update_schema()
    with pytest.raises(ValidationError, match="already exists"):
        u.add_column("n", "long")
    with pytest.raises(ValidationError, match="does not exist"):
        u.rename_column("nope", "x2")
    with pytest.raises(ValidationError, match="that name exists"):
        u.rename_column("n", "x")
    with pytest.raises(ValidationError, match="different structs"):
        u.move_before("addr.city", "n")


def test_a_change_is_reapplied_after_a_concurrent_schema_change(table: IcebergTable) -> None:
    stale = table.update_schema()
    stale.add_column("b", "string")
    other = table.catalog.load_table("db.t")
    with other.update_schema() as u:
        u.add_column("a", "string")
    stale.commit()
    s = table.schema()
    assert s.column_names[-2:] == ["a", "b"]
    assert s.find_field("b").field_id == s.find_field("a").field_id + 1
    assert [x.schema_id for x in table.metadata.schemas] == [0, 1, 2]


def test_added_nested_field_types_get_fresh_ids(table: IcebergTable) -> None:
    last = table.metadata.last_column_id
    nested = StructType(NestedField(1, "a", IntegerType()), NestedField(2, "b", StringType()))
    with table.update_schema() as u:
        u.add_column("blob", nested)
        u.add_column("tags", pa.list_(pa.string()))
    s = table.schema()
    new_ids = sorted(
        s.find_field(n).field_id for n in ("blob", "blob.a", "blob.b", "tags", "tags.element")
    )
    assert new_ids == list(range(last + 1, last + 6))
    assert table.metadata.last_column_id == last + 5


def test_partition_spec_evolution_keeps_old_files_readable(table: IcebergTable) -> None:
    with table.update_spec() as u:
        u.add_field("id", "bucket[4]")
    spec = table.spec()
    assert spec.spec_id == 1 and [f.name for f in spec.fields] == ["id_bucket"]
    assert spec.fields[0].field_id == 1000
    table.append(pa.table({"id": [5, 6], "n": pa.array([1, 2], pa.int32()), "must": ["c", "d"]}))
    with table.update_spec() as u:
        u.remove_field("id_bucket")
        u.add_field("must", "identity")
    spec2 = table.spec()
    assert spec2.spec_id == 2 and spec2.fields[0].field_id == 1001
    table.append(pa.table({"id": [7], "must": ["e"]}))
    with table.update_spec() as u:
        u.remove_field("must")
        u.add_field("id", "bucket[4]")  # the id of the earlier identical field comes back
    assert table.spec().fields[0].field_id == 1000
    ids = sorted(r["id"] for r in table.scan().to_arrow().to_pylist())
    assert ids == [1, 2, 5, 6, 7]
    specs = {f.spec_id for task in table.scan().plan_files() for f in [task.data_file]}
    assert specs == {0, 1, 2}
    for reader in (duckdb_rows, pyiceberg_rows):
        assert sorted(r["id"] for r in reader(table.metadata_location)) == [1, 2, 5, 6, 7]
    assert [r["id"] for r in table.scan(row_filter="id = 6").to_arrow().to_pylist()] == [6]
    with pytest.raises(ValidationError, match="no partition field"):
        table.update_spec().remove_field("nope")


def test_scans_use_the_current_schema_and_time_travel_the_snapshots(table: IcebergTable) -> None:
    snap = table.current_snapshot()
    assert snap is not None
    with table.update_schema() as u:
        u.add_column("later", "string")
    assert table.scan().to_arrow().column_names[-1] == "later"  # no new snapshot needed
    assert "later" not in table.scan(snapshot_id=snap.snapshot_id).to_arrow().column_names
