"""stream_sink and pyiceberg share tables through one SQL catalog database.

Our SQL catalog and pyiceberg's SqlCatalog use the same JDBC schema, so each opens
the other's tables by name. Appends alternate between the two libraries on a
table pyiceberg created and on one we created; after every append both sides
(and DuckDB) read exactly the rows appended so far, and the snapshot history is
one linear chain with the standard totals.

(pyiceberg has no Hadoop-layout catalog, so tables it writes are shared only
through the SQL catalog.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import canonical_rows, duckdb_rows

import stream_sink as ss
from stream_sink.table.arrow import schema_from_arrow
from stream_sink.table.catalog import Catalog

pyiceberg_sql = pytest.importorskip("pyiceberg.catalog.sql")
from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema as PySchema  # noqa: E402
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform  # noqa: E402
from pyiceberg.types import (  # noqa: E402
    DecimalType,
    ListType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

NAME = "shared"
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("tstz", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("tags", pa.list_(pa.field("element", pa.string()))),
    ]
)
PY_SCHEMA = PySchema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "tstz", TimestamptzType()),
    NestedField(5, "amount", DecimalType(10, 2)),
    NestedField(6, "tags", ListType(7, StringType(), element_required=False)),
)
PY_SPEC = PartitionSpec(
    PartitionField(source_id=3, field_id=1000, transform=DayTransform(), name="ts_day"),
    PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_bucket"),
    PartitionField(source_id=2, field_id=1002, transform=IdentityTransform(), name="name"),
)
OUR_SPEC = [("day", "ts"), ("bucket", "id", 4), ("identity", "name")]
SCHEMA = schema_from_arrow(ARROW)


def batch(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    base = datetime(1969, 12, 30, 22)
    return pa.table(
        {
            "id": [i - 10 for i in ids],
            "name": [None if i % 7 == 3 else ["ä", "ß", "名", "x"][i % 4] for i in ids],
            "ts": [None if i % 9 == 4 else base + timedelta(hours=5 * i) for i in ids],
            "tstz": [
                datetime(2000, 2, 29, tzinfo=timezone.utc) - timedelta(minutes=i * 997) for i in ids
            ],
            "amount": [None if i % 5 == 0 else Decimal(i * 137 - 900) / 100 for i in ids],
            "tags": [None if i % 6 == 1 else [f"t{i}", None][: i % 3] for i in ids],
        },
        schema=ARROW,
    )


@pytest.fixture
def catalogs(tmp_path: Path) -> Iterator[tuple[Any, Catalog]]:
    """pyiceberg's SqlCatalog and ours on the same SQLite database and warehouse."""
    uri, warehouse = f"sqlite:///{tmp_path}/catalog.db", tmp_path / "wh"
    py = pyiceberg_sql.SqlCatalog(NAME, uri=uri, warehouse=f"file://{warehouse}")
    ours = ss.load_catalog(NAME, type="sql", uri=uri, warehouse=str(warehouse))
    yield py, ours
    ours.close()
    py.engine.dispose()


def expected(*batches: pa.Table) -> list[dict[str, Any]]:
    return canonical_rows(pa.concat_tables(batches).to_pylist(), SCHEMA)


def assert_both_read(py: Any, ours: Catalog, *batches: pa.Table) -> None:
    """pyiceberg, our scan and DuckDB read exactly ``batches``; one linear history."""
    want = expected(*batches)
    py_table = py.load_table("db.t")
    our_table = ours.load_table("db.t")
    assert our_table.metadata_location == py_table.metadata_location
    assert canonical_rows(py_table.scan().to_arrow().to_pylist(), SCHEMA) == want
    ours_read = our_table.scan().to_arrow()  # type: ignore[attr-defined]
    assert canonical_rows(ours_read.to_pylist(), SCHEMA) == want
    assert canonical_rows(duckdb_rows(our_table.metadata_location), SCHEMA) == want

    snapshots = our_table.snapshots()
    assert len(snapshots) == len(batches)
    assert [s.parent_snapshot_id for s in snapshots[1:]] == [s.snapshot_id for s in snapshots[:-1]]
    added = [int(s.summary["added-records"]) for s in snapshots]
    assert added == [b.num_rows for b in batches]
    assert int(snapshots[-1].summary["total-records"]) == len(want)


def py_append(py: Any, data: pa.Table) -> None:
    py.load_table("db.t").append(data)


def our_append(ours: Catalog, data: pa.Table) -> None:
    ours.load_table("db.t").append(data)  # type: ignore[attr-defined]


def run_alternating(py: Any, ours: Catalog, appenders: list[Callable[[pa.Table], None]]) -> None:
    batches = []
    for n, append in enumerate(appenders):
        batches.append(batch(n * 20, 20))
        append(batches[-1])
        assert_both_read(py, ours, *batches)


def test_table_pyiceberg_created_appends_in_both(catalogs: tuple[Any, Catalog]) -> None:
    py, ours = catalogs
    py.create_namespace("db")
    py.create_table("db.t", schema=PY_SCHEMA, partition_spec=PY_SPEC)
    assert ours.list_tables("db") == [("db", "t")]
    run_alternating(
        py,
        ours,
        [
            lambda d: py_append(py, d),
            lambda d: our_append(ours, d),
            lambda d: py_append(py, d),
            lambda d: our_append(ours, d),
        ],
    )
    # our appends used pyiceberg's partition spec: same partition directories
    table = ours.load_table("db.t")
    assert [str(f.transform) for f in table.spec().fields] == ["day", "bucket[4]", "identity"]


def test_table_we_created_appends_in_both(catalogs: tuple[Any, Catalog]) -> None:
    py, ours = catalogs
    ours.create_namespace("db")
    ours.create_table("db.t", ARROW, OUR_SPEC)
    assert [tuple(i) for i in py.list_tables("db")] == [("db", "t")]
    spec = py.load_table("db.t").spec()
    assert [(f.source_id, str(f.transform), f.name) for f in spec.fields] == [
        (3, "day", "ts_day"),
        (1, "bucket[4]", "id_bucket"),
        (2, "identity", "name"),
    ]
    run_alternating(
        py,
        ours,
        [
            lambda d: our_append(ours, d),
            lambda d: py_append(py, d),
            lambda d: our_append(ours, d),
            lambda d: py_append(py, d),
        ],
    )
