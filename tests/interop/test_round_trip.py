"""Tables stream_sink creates and appends to, read back row for row by every reader.

One table per partition shape (``interop_data.SHAPES``: unpartitioned, each
transform on each source type, several at once), all holding the same wide rows
(every type, nested, nulls, unicode, negatives, pre-1970 dates and timestamps,
decimals, binary, timestamps with and without zone), committed in two appends.
Every table is written twice, in format version 2 and (``<name>_v3``) version 3.
The tables live in a SQLite catalog, plus one in a Hadoop catalog; each is read
by our scan, DuckDB's iceberg extension, pyiceberg (StaticTable on the metadata
file, and its SqlCatalog on our catalog database) and Java Iceberg (one call for
every table of this module). Each reader's rows must equal the rows written,
compared exactly after sorting by id (only the timezone and container
representation is normalized, see ``readers.canonical_rows``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from interop_data import SCHEMA, SHAPES, TIME_SCHEMA, rows, time_rows
from readers import (
    canonical_rows,
    duckdb_columns,
    duckdb_connection,
    pyiceberg_catalog_rows,
    pyiceberg_rows,
)

import stream_sink as ss
from stream_sink.table.catalog import Catalog
from stream_sink.table.schema import Schema
from stream_sink.tables import IcebergTable

CATALOG = "round_trip"
# pyiceberg rebuilds a null list<struct> as an empty list when it reads
# (apache/iceberg-python#251, #3833), so it is not compared on that column.
PYICEBERG_UNREADABLE = ("los",)
SPLIT = 20  # rows [0, SPLIT) in the first append, the rest in the second


@dataclass(frozen=True)
class Written:
    table: IcebergTable
    schema: Schema
    expected: list[dict[str, Any]]
    appends: int
    catalog_uri: str | None  # the SQL catalog holding it; None for the Hadoop one
    warehouse: str
    java: bool = True  # see interop_data: Spark cannot read time, Java misreads one shape


def _write(
    catalog: Catalog,
    name: str,
    schema: Schema,
    spec: Sequence[Any],
    chunks: list[pa.Table],
    format_version: int,
) -> IcebergTable:
    suffix = "_v3" if format_version == 3 else ""
    table = catalog.create_table(
        f"db.{name}{suffix}", schema, list(spec), format_version=format_version
    )
    assert isinstance(table, IcebergTable)
    for chunk in chunks:
        table.append(chunk)
    return table


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Written]:
    root = tmp_path_factory.mktemp("round-trip")
    uri, sql_wh, hadoop_wh = f"sqlite:///{root}/catalog.db", str(root / "sql"), str(root / "hc")
    sql = ss.load_catalog(CATALOG, type="sql", uri=uri, warehouse=sql_wh)
    hadoop = ss.load_catalog("hc", type="hadoop", warehouse=hadoop_wh)
    for catalog in (sql, hadoop):
        catalog.create_namespace("db")
    data = rows()
    halves = [data.slice(0, SPLIT), data.slice(SPLIT)]
    expected = _expected(data, SCHEMA)
    out: dict[str, Written] = {}
    for version, suffix in VERSIONS:
        for shape in SHAPES:
            table = _write(sql, shape.name, SCHEMA, shape.spec, halves, version)
            written = Written(table, SCHEMA, expected, 2, uri, sql_wh, java=shape.java)
            out[shape.name + suffix] = written
        multi = next(s for s in SHAPES if s.name == "multi")
        table = _write(hadoop, "multi", SCHEMA, multi.spec, halves, version)
        out["hadoop_multi" + suffix] = Written(table, SCHEMA, expected, 2, None, hadoop_wh)
        table = _write(sql, "times", TIME_SCHEMA, (), [time_rows()], version)
        times = _expected(time_rows(), TIME_SCHEMA)
        out["times" + suffix] = Written(table, TIME_SCHEMA, times, 1, uri, sql_wh, java=False)
    return out


def _expected(data: pa.Table, schema: Schema) -> list[dict[str, Any]]:
    return canonical_rows(data.to_pylist(), schema)


VERSIONS = ((2, ""), (3, "_v3"))
NAMES = [
    n + suffix
    for _, suffix in VERSIONS
    for n in [s.name for s in SHAPES] + ["hadoop_multi", "times"]
]
NOT_JAVA = [
    n + suffix for _, suffix in VERSIONS for n in [s.name for s in SHAPES if not s.java] + ["times"]
]


def _columns(w: Written, unreadable: Sequence[str] = ()) -> list[str]:
    return [f.name for f in w.schema.fields if f.name not in unreadable]


def _subset(expected: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    return [{c: r[c] for c in columns} for r in expected]


@pytest.mark.parametrize("name", NAMES)
def test_each_append_is_one_snapshot(written: dict[str, Written], name: str) -> None:
    w = written[name]
    snapshots = w.table.snapshots()
    assert [s.summary["operation"] for s in snapshots] == ["append"] * w.appends
    assert int(snapshots[-1].summary["total-records"]) == len(w.expected)


@pytest.mark.parametrize("name", NAMES)
def test_our_scan_reads_what_was_written(written: dict[str, Written], name: str) -> None:
    w = written[name]
    got = w.table.scan().to_arrow().to_pylist()
    assert canonical_rows(got, w.schema) == w.expected


@pytest.fixture(scope="module")
def duckdb_con() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb_connection()
    yield con
    con.close()


@pytest.mark.parametrize("name", NAMES)
def test_duckdb_reads_what_was_written(
    written: dict[str, Written], duckdb_con: duckdb.DuckDBPyConnection, name: str
) -> None:
    w = written[name]
    columns = _columns(w)
    got = duckdb_columns(w.table.metadata_location, columns, duckdb_con)
    assert canonical_rows(got, w.schema, columns) == _subset(w.expected, columns)


@pytest.mark.parametrize("name", NAMES)
def test_pyiceberg_static_table_reads_what_was_written(
    written: dict[str, Written], name: str
) -> None:
    w = written[name]
    columns = _columns(w, PYICEBERG_UNREADABLE)
    got = pyiceberg_rows(w.table.metadata_location)
    assert canonical_rows(got, w.schema, columns) == _subset(w.expected, columns)


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("hadoop_multi")])
def test_pyiceberg_sql_catalog_reads_what_was_written(
    written: dict[str, Written], name: str
) -> None:
    w = written[name]
    assert w.catalog_uri is not None
    columns = _columns(w, PYICEBERG_UNREADABLE)
    got = pyiceberg_catalog_rows(
        CATALOG, w.catalog_uri, f"file://{w.warehouse}", f"db.{w.table.identifier[-1]}"
    )
    assert canonical_rows(got, w.schema, columns) == _subset(w.expected, columns)


@pytest.fixture(scope="module")
def java_rows(written: dict[str, Written], java_read: Any) -> dict[str, pa.Table]:
    """Every table of this module that Spark can read, read by Java in one call."""
    names = [n for n in NAMES if written[n].java]
    tables = java_read([written[n].table.metadata_location for n in names])
    return dict(zip(names, tables, strict=True))


@pytest.mark.interop
@pytest.mark.parametrize("name", [n for n in NAMES if n not in NOT_JAVA])
def test_java_iceberg_reads_what_was_written(
    written: dict[str, Written], java_rows: dict[str, pa.Table], name: str
) -> None:
    w = written[name]
    got = java_rows[name]
    assert got.column_names == _columns(w)
    assert canonical_rows(got.to_pylist(), w.schema) == w.expected
