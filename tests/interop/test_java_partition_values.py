"""Partition values we record equal what Apache Iceberg Java computes for the same rows.

Every partitioned shape of ``interop_data.SHAPES`` is written by stream_sink into a
Hadoop warehouse; Java's HadoopCatalog opens those tables by name and, in one
Spark SQL session, returns per row: its data file (``_file``), the partition tuple
Java reads from our manifests (``_partition``), and Java's own transform functions
applied to the row (``hc.system.bucket/truncate/years/months/days/hours``).

Per row, four things must agree: the tuple our manifest records for the row's
file, Java's ``_partition``, Java's functions on the row, and our transforms
applied to the rows we wrote.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime, timezone
from typing import Any

import pyarrow as pa
import pytest
from interop_data import SCHEMA, SHAPES, rows

import stream_sink as ss
from stream_sink.table.manifest import read_manifest
from stream_sink.table.manifest_list import read_manifest_list
from stream_sink.table.partitioning import PartitionField
from stream_sink.table.table import Table
from stream_sink.table.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Transform,
    Truncate,
    Void,
    Year,
)
from stream_sink.table.types import DateType, IcebergType, TimestampType, TimestamptzType, UUIDType

pytestmark = pytest.mark.interop

PARTITIONED = [s for s in SHAPES if s.spec and s.java]
SPLIT = 20
_EPOCH_DAY = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1)
_JAVA_TIME_FUNCTIONS: dict[type[Transform], str] = {
    Year: "years",
    Month: "months",
    Day: "days",
    Hour: "hours",
}

Tuple = tuple[Any, ...]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Table]]:
    root = str(tmp_path_factory.mktemp("partition-values") / "wh")
    catalog = ss.load_catalog("pv", type="hadoop", warehouse=root)
    catalog.create_namespace("db")
    data = rows()
    tables = {}
    for shape in PARTITIONED:
        table = catalog.create_table(f"db.{shape.name}", SCHEMA, list(shape.spec))
        table.append(data.slice(0, SPLIT))  # type: ignore[attr-defined]
        table.append(data.slice(SPLIT))  # type: ignore[attr-defined]
        tables[shape.name] = table
    return root, tables


def java_expression(table: Table, f: PartitionField) -> str | None:
    """Java's function for partition field ``f`` as Spark SQL; None for void (always null)."""
    col = f"`{table.schema().find_column_name(f.source_id)}`"
    t = f.transform
    if isinstance(table.schema().find_type(f.source_id), UUIDType):
        # Spark shows a uuid as text; the spec hashes (and truncates nothing of) its 16
        # big-endian bytes, which unhex gives back
        col = f"unhex(replace({col}, '-', ''))" if isinstance(t, Bucket) else col
    if isinstance(t, Identity):
        return col
    if isinstance(t, Bucket):
        return f"hc.system.bucket({t.num_buckets}, {col})"
    if isinstance(t, Truncate):
        return f"hc.system.truncate({t.width}, {col})"
    if isinstance(t, Void):
        return None
    return f"hc.system.{_JAVA_TIME_FUNCTIONS[type(t)]}({col})"


def java_query(name: str, table: Table) -> str:
    columns = ["id", "_file AS file", "_partition AS part"] + [
        f"{expr} AS p{i}"
        for i, f in enumerate(table.spec().fields)
        if (expr := java_expression(table, f)) is not None
    ]
    return f"SELECT {', '.join(columns)} FROM hc.db.{name}"


@pytest.fixture(scope="module")
def java_results(warehouse: tuple[str, dict[str, Table]], java_sql: Any) -> dict[str, pa.Table]:
    """One Spark session: one query per table."""
    root, tables = warehouse
    names = list(tables)
    results = java_sql(root, [java_query(n, tables[n]) for n in names])
    return dict(zip(names, results, strict=True))


def internal(value: Any, t: IcebergType) -> Any:
    """A partition value in the manifest's internal form, from Java's (Spark's) form."""
    if value is None:
        return None
    if isinstance(t, DateType) and isinstance(value, date):
        return (value - _EPOCH_DAY).days
    if isinstance(t, (TimestampType, TimestamptzType)) and isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(t, UUIDType) and isinstance(value, str):
        return uuid.UUID(value).bytes
    return value


def manifest_partitions(table: Table) -> dict[str, Tuple]:
    """Data file path -> the partition tuple our manifests record for it."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    ptype = table.spec().partition_type(table.schema())
    out = {}
    for manifest in read_manifest_list(table.io, snapshot.manifest_list):
        for entry in read_manifest(table.io, manifest, ptype):
            out[entry.data_file.file_path] = tuple(entry.data_file.partition)
    return out


def java_computed(table: Table, row: dict[str, Any]) -> Tuple:
    ptype = table.spec().partition_type(table.schema())
    return tuple(
        None if isinstance(f.transform, Void) else internal(row[f"p{i}"], pf.field_type)
        for i, (f, pf) in enumerate(zip(table.spec().fields, ptype.fields, strict=True))
    )


def java_partition(table: Table, row: dict[str, Any]) -> Tuple:
    ptype = table.spec().partition_type(table.schema())
    return tuple(internal(row["part"][f.name], f.field_type) for f in ptype.fields)


def our_transforms(table: Table) -> dict[int, Tuple]:
    """Row id -> our transforms applied to the rows written."""
    data = rows()
    ptype = table.spec().partition_type(table.schema())
    columns = [
        [internal(v, f.field_type) for v in arr.to_pylist()]
        for arr, f in zip(table.spec().compute(data, table.schema()), ptype.fields, strict=True)
    ]
    ids = data.column("id").to_pylist()
    return {i: tuple(c[n] for c in columns) for n, i in enumerate(ids)}


@pytest.mark.parametrize("name", [s.name for s in PARTITIONED])
def test_recorded_partitions_equal_java_transforms(
    warehouse: tuple[str, dict[str, Table]], java_results: dict[str, pa.Table], name: str
) -> None:
    table = warehouse[1][name]
    recorded = manifest_partitions(table)
    ours = our_transforms(table)
    java_rows = java_results[name].to_pylist()
    assert sorted(r["id"] for r in java_rows) == sorted(ours)
    for row in java_rows:
        computed = java_computed(table, row)
        where = f"table {name}, row id={row['id']}, file {row['file']}"
        assert recorded[row["file"]] == computed, where
        assert java_partition(table, row) == computed, where
        assert ours[row["id"]] == computed, where
    # not vacuous: rows spread over several partitions, at least null, before and after
    # 1970 (one partition when all fields are void), and the rows whose columns are all
    # null have a null in every partition field
    spread = 1 if table.spec().is_unpartitioned else 3
    assert len(set(recorded.values())) >= spread
    assert (None,) * len(table.spec().fields) in recorded.values()
