"""Independent readers of our tables: DuckDB's iceberg extension and pyiceberg.

Both take a metadata file location and return the table's rows as dicts, so a
test can compare them with what it wrote (order-insensitively via ``sorted_rows``).
"""

from __future__ import annotations

import glob
import importlib
import math
import os
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import duckdb
import pyarrow as pa

from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    BinaryType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    ListType,
    MapType,
    StructType,
    TimestamptzType,
    UUIDType,
)

_EXTENSIONS = ("duckdb_extension_avro", "duckdb_extension_iceberg")


def _extension_file(package: str) -> str:
    """The ``.duckdb_extension`` file shipped inside a PyPI extension package."""
    module = importlib.import_module(package)
    root = os.path.dirname(module.__file__ or "")
    found = sorted(glob.glob(os.path.join(root, "**", "*.duckdb_extension"), recursive=True))
    if not found:
        raise FileNotFoundError(f"no .duckdb_extension file inside package {package}")
    return found[-1]


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the avro and iceberg extensions loaded (no network)."""
    con = duckdb.connect()
    for package in _EXTENSIONS:
        path = _extension_file(package).replace("'", "''")
        con.execute(f"LOAD '{path}'")
    return con


def duckdb_query(metadata_location: str, where: str = "") -> list[dict[str, Any]]:
    con = duckdb_connection()
    try:
        loc = metadata_location.replace("'", "''")
        sql = f"SELECT * FROM iceberg_scan('{loc}')" + (f" WHERE {where}" if where else "")
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()


def duckdb_rows(metadata_location: str) -> list[dict[str, Any]]:
    """Every row of the table at ``metadata_location`` as DuckDB reads it."""
    return duckdb_query(metadata_location)


def pyiceberg_table(metadata_location: str) -> Any:
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(metadata_location)


def pyiceberg_rows(metadata_location: str) -> list[dict[str, Any]]:
    """Every row of the table at ``metadata_location`` as pyiceberg reads it."""
    return pyiceberg_table(metadata_location).scan().to_arrow().to_pylist()


def sorted_rows(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r[key] is None, r[key]))


def comparable(rows: list[dict[str, Any]], key: str) -> str:
    """Rows sorted by ``key`` as text: NaN equals NaN, zoned timestamps shown in UTC."""
    return repr([{k: _plain(v) for k, v in r.items()} for r in sorted_rows(rows, key)])


def _plain(v: Any) -> Any:
    if isinstance(v, datetime) and v.tzinfo is not None:
        return v.astimezone(timezone.utc)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


# --- values as every reader agrees to show them -------------------------------------------


def canonical_rows(
    rows: list[dict[str, Any]], schema: Schema, columns: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """``rows`` (from any reader) in one comparable form, sorted by ``id``.

    Only the representation is normalized, per the column's Iceberg type: zoned
    timestamps in UTC, uuids as ``uuid.UUID`` (readers give bytes, ``UUID`` or
    text), binary as ``bytes``, maps as lists of ``(key, value)`` pairs in file
    order (DuckDB gives dicts), NaN as the text ``"NaN"`` so that it equals
    itself. Values are never rounded or coerced across types.
    """
    names = list(columns) if columns is not None else [f.name for f in schema.fields]
    fields = {f.name: f for f in schema.fields}
    out = [{n: canonical_value(r.get(n), fields[n].field_type) for n in names} for r in rows]
    return sorted(out, key=lambda r: r["id"])


def canonical_value(value: Any, t: IcebergType) -> Any:
    if value is None:
        return None
    if isinstance(t, StructType):
        return {f.name: canonical_value(value.get(f.name), f.field_type) for f in t.fields}
    if isinstance(t, ListType):
        return [canonical_value(v, t.element_type) for v in value]
    if isinstance(t, MapType):
        pairs = value.items() if isinstance(value, dict) else value
        kt, vt = t.key_type, t.value_type
        return [(canonical_value(k, kt), canonical_value(v, vt)) for k, v in pairs]
    if isinstance(t, (FloatType, DoubleType)):
        return "NaN" if math.isnan(value) else value
    if isinstance(t, TimestamptzType) and isinstance(value, datetime) and value.tzinfo:
        return value.astimezone(timezone.utc)
    if isinstance(t, UUIDType):
        if isinstance(value, uuid.UUID):
            return value
        return uuid.UUID(value) if isinstance(value, str) else uuid.UUID(bytes=bytes(value))
    if isinstance(t, (BinaryType, FixedType)) and isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()


def pyiceberg_catalog_rows(
    catalog_name: str, uri: str, warehouse: str, identifier: str
) -> list[dict[str, Any]]:
    """Every row of ``identifier`` as pyiceberg's SqlCatalog on database ``uri`` reads it."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(catalog_name, uri=uri, warehouse=warehouse)
    try:
        return catalog.load_table(identifier).scan().to_arrow().to_pylist()
    finally:
        catalog.engine.dispose()


def duckdb_columns(
    metadata_location: str,
    columns: Sequence[str],
    con: duckdb.DuckDBPyConnection | None = None,
) -> list[dict[str, Any]]:
    """Only ``columns`` of the table at ``metadata_location``, as DuckDB reads them.

    ``con``: a connection from :func:`duckdb_connection` to reuse (loading the
    extensions takes about a second); a new one is opened and closed otherwise.
    """
    own = con is None
    con = duckdb_connection() if con is None else con
    try:
        loc = metadata_location.replace("'", "''")
        select = ", ".join(f'"{c}"' for c in columns)
        cur = con.execute(f"SELECT {select} FROM iceberg_scan('{loc}')")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        if own:
            con.close()


def rest_catalog_ids(server: Any, bucket: str, ns: str, table: str) -> tuple[list[int], list[int]]:
    """The sorted ``id`` column of ``ns.table`` in table bucket ``bucket`` of a SeaweedFS
    REST catalog ``server``, as pyiceberg's REST catalog and DuckDB's ``ATTACH`` of the
    catalog read it. Neither is given S3 keys: a catalog that vends credentials serves
    both."""
    from pyiceberg.catalog import load_catalog as py_load_catalog

    props = dict(server.rest_props(bucket))
    props["client.access-key-id"] = server.access_key
    props["client.secret-access-key"] = server.secret_key
    py_table = py_load_catalog("py", **props).load_table((ns, table))
    py_ids = sorted(py_table.scan().to_arrow().column("id").to_pylist())
    con = duckdb_connection()
    con.execute(f"LOAD '{_extension_file('duckdb_extension_httpfs')}'")
    con.execute(
        f"CREATE SECRET rest (TYPE iceberg, CLIENT_ID '{server.access_key}', "
        f"CLIENT_SECRET '{server.secret_key}', "
        f"OAUTH2_SERVER_URI '{server.catalog_uri}/v1/oauth/tokens')"
    )
    con.execute(
        f"ATTACH 's3://{bucket}' AS lake (TYPE iceberg, ENDPOINT '{server.catalog_uri}', "
        "SECRET rest)"
    )
    got = con.execute(f'SELECT id FROM lake."{ns}".{table} ORDER BY id').fetchall()
    return py_ids, [r[0] for r in got]


def unauthenticated_rest_ids(
    uri: str, warehouse: str, region: str, ns: str, table: str
) -> tuple[list[int], list[int]]:
    """The sorted ``id`` column of ``ns.table`` in a REST catalog that asks for no
    authentication (Nessie's), as pyiceberg's REST catalog and DuckDB's ``ATTACH`` of the
    catalog read it, each with the credentials the catalog vends (neither is given S3
    keys). pyiceberg reads through its PyArrow FileIO: the load result names fsspec's,
    whose s3fs the tests do not install."""
    from pyiceberg.catalog import load_catalog as py_load_catalog
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.table import Table

    py_catalog = py_load_catalog("py", uri=uri, warehouse=warehouse, **{"s3.region": region})
    loaded = py_catalog.load_table((ns, table))
    io = PyArrowFileIO(dict(loaded.io.properties))
    py_table = Table(loaded.name(), loaded.metadata, loaded.metadata_location, io, py_catalog)
    py_ids = sorted(py_table.scan().to_arrow().column("id").to_pylist())
    duck_ids = sorted(r["id"] for r in duckdb_rest_rows(uri, warehouse, ns, table))
    return py_ids, duck_ids


def duckdb_rest_rows(uri: str, warehouse: str, ns: str, table: str) -> list[dict[str, Any]]:
    """Every row of ``ns.table`` in a REST catalog that asks for no authentication
    (Nessie's), as DuckDB's ``ATTACH`` of the catalog reads it with the credentials the
    catalog vends (it is given no S3 keys)."""
    con = duckdb_connection()
    try:
        con.execute(f"LOAD '{_extension_file('duckdb_extension_httpfs')}'")
        con.execute(
            f"ATTACH '{warehouse}' AS lake (TYPE iceberg, ENDPOINT '{uri}', "
            "AUTHORIZATION_TYPE 'none')"
        )
        cur = con.execute(f'SELECT * FROM lake."{ns}".{table}')
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()
