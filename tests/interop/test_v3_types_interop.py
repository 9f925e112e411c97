"""Apache Iceberg Java (1.10) reads our tables with ``timestamp_ns``, ``timestamptz_ns`` and
``unknown`` columns exactly, through its own generic reader (Spark has no nanosecond type,
and Iceberg's Spark integration refuses such tables): partitioned by ``hour`` and ``bucket``
of nanosecond columns (Java's filters prune by its own transforms of the values, so a
partition value or bound of ours that differed from Java's would lose the row's file), with
deletion vectors and with equality deletes on a long key. One JVM for every read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from peers.readers import java_available, read_with_java, read_with_java_generic

from stream_sink.table.catalog import Catalog
from stream_sink.table.nanos import format_nanos, parse_nanos
from stream_sink.tables import IcebergTable

pytestmark = [pytest.mark.interop, pytest.mark.slow]

NS = pa.timestamp("ns")
NS_UTC = pa.timestamp("ns", tz="UTC")
SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("ts", NS, nullable=False),
     pa.field("tz", NS_UTC), pa.field("u", pa.null())]
)  # fmt: skip
VALUES = [
    parse_nanos("2017-11-16T22:31:08", False),
    parse_nanos("2017-11-16T22:31:08.000001001", False),
    parse_nanos("1969-12-31T23:59:59.999999999", False),
    5,
]
Row = tuple[Any, ...]


def rows(ids: list[int], ts: list[int], tz: list[int | None]) -> pa.Table:
    data = {"id": ids, "ts": pa.array(ts, NS), "tz": pa.array(tz, NS_UTC)}
    return pa.table(data).cast(pa.schema([f for f in SCHEMA if f.name != "u"]))


def ours(t: IcebergTable) -> list[Row]:
    got = t.refresh().scan().to_arrow()
    ts, tz = (got[c].cast(pa.int64()).to_pylist() for c in ("ts", "tz"))
    return sorted(zip(got["id"].to_pylist(), ts, tz, got["u"].to_pylist(), strict=True))


def from_java(table: pa.Table) -> list[Row]:
    """Java's text values (``LocalDateTime``/``OffsetDateTime.toString``) as ours."""
    out = []
    for r in table.to_pylist():
        tz = None if r["tz"] is None else parse_nanos(r["tz"], True)
        out.append((int(r["id"]), parse_nanos(r["ts"], False), tz, r["u"]))
    return sorted(out)


def data_files(t: IcebergTable) -> dict[str, dict[str, list[int | None]]]:
    """Path -> column -> int nanoseconds, of every live data file of ``t``."""
    out = {}
    for task in t.refresh().scan().plan_files():
        path = task.file_path.removeprefix("file:")
        data = pq.read_table(path, columns=["ts", "tz"])
        out[path] = {c: data[c].cast(pa.int64()).to_pylist() for c in ("ts", "tz")}
    return out


def build(catalog: Catalog) -> dict[str, IcebergTable]:
    parts = catalog.create_table(
        "db.parts", SCHEMA, [("hour", "ts"), ("bucket", "tz", 4)], format_version=3
    )
    parts.append(rows([1, 2, 3, 4], VALUES, [*VALUES[1:], None]))
    parts.append(rows([5], [VALUES[1] + 1], [VALUES[0]]))

    keyed = catalog.create_table(
        "db.keyed", SCHEMA, [("day", "ts")], identifier_fields=["ts"], format_version=3
    )
    keyed.append(rows([1, 2, 3], VALUES[:3], VALUES[:3]))
    keyed.upsert(rows([20, 40, 41], [VALUES[1], VALUES[3], VALUES[3]], [None, 1, 2]))
    keyed.maintenance.convert_equality_deletes()  # Java 1.10: no equality deletes on ns keys

    by_id = catalog.create_table(
        "db.by_id", SCHEMA, [("bucket", "id", 2)], identifier_fields=["id"], format_version=3
    )
    by_id.append(rows([1, 2, 3], VALUES[:3], VALUES[:3]))
    by_id.upsert(rows([2, 5, 5], [VALUES[3], 7, 8], [None, 7, 8]))  # a vector and eq deletes
    return {"parts": parts, "keyed": keyed, "by_id": by_id}


def test_java_reads_nanosecond_and_unknown_columns_exactly(hadoop_catalog: Catalog) -> None:
    if not java_available():
        pytest.skip("the Java Iceberg launcher is not available")
    tables = build(hadoop_catalog)
    locations = [t.refresh().metadata_location for t in tables.values()]
    parts = tables["parts"]
    probes = [("ts", format_nanos(v, False)) for v in (VALUES[1] + 1, VALUES[2], VALUES[3])]
    probes += [("tz", format_nanos(VALUES[2], True))]
    unknown = hadoop_catalog.create_table(
        "db.unknown", pa.schema([pa.field("id", pa.int64()), pa.field("u", pa.null())]),
        format_version=3,
    )  # fmt: skip
    unknown.append(pa.table({"id": [1, 2]}))
    read = read_with_java_generic([*locations, unknown.metadata_location])
    filtered = [read_with_java_generic([parts.metadata_location], [f"{c}={v}"])[0]
                for c, v in probes]  # fmt: skip

    for t, java in zip(tables.values(), read[:-1], strict=True):
        assert from_java(java) == ours(t), t.name
    assert sorted(read[-1].to_pylist(), key=lambda r: int(r["id"])) == [
        {"id": "1", "u": None},
        {"id": "2", "u": None},
    ]
    assert [r[0] for r in ours(tables["keyed"])] == [1, 3, 20, 41]  # the last one of a key
    assert [r[0] for r in ours(tables["by_id"])] == [1, 2, 3, 5]
    files = data_files(parts)
    for (column, text), java in zip(probes, filtered, strict=True):
        value = parse_nanos(text, column == "tz")
        needed = {path for path, data in files.items() if value in data[column]}
        planned = {path.removeprefix("file:") for path in java.column("file").to_pylist()}
        assert needed and needed <= planned < set(files), (column, text)
    # last (a failed call restarts the JVM): Java 1.10 on Spark refuses unknown columns
    with pytest.raises(AssertionError, match="Cannot convert unknown type to Spark"):
        read_with_java([unknown.metadata_location])


def test_spark_refuses_nanosecond_columns_by_name(spark: Any, tmp_path: Path) -> None:
    """Our Spark reader refuses what Spark cannot hold (as Iceberg's Spark integration
    does) and reads the other columns, ``unknown`` as Spark's NullType."""
    from pyspark.sql import types as st

    import stream_sink as ss
    from stream_sink.exceptions import UnsupportedError
    from stream_sink.spark.read.dataframe import read_table

    catalog = ss.load_catalog("t", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", SCHEMA, format_version=3)
    t.append(rows([1], [VALUES[1]], [None]))
    with pytest.raises(UnsupportedError, match=r"column 'ts'.*no Spark type.*columns="):
        read_table(spark, t)
    df = read_table(spark, t, columns=["id", "u"])
    assert df.schema["u"].dataType == st.NullType()
    assert [tuple(r) for r in df.collect()] == [(1, None)]
