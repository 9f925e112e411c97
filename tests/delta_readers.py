"""Independent readers of Delta tables: delta-rs (``deltalake``) and DuckDB's delta
extension (loaded offline from its PyPI package, like the iceberg extension; on
``s3://`` with the httpfs extension package too).

``s3`` arguments are our FileIO properties (``s3.endpoint``, keys, region), turned into
each reader's own settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

import duckdb
from readers import _extension_file


def delta_rs_storage_options(s3: Mapping[str, str]) -> dict[str, str]:
    """delta-rs's storage options for the S3 server our properties name."""
    return {
        "AWS_ENDPOINT_URL": s3["s3.endpoint"],
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": s3["s3.access-key-id"],
        "AWS_SECRET_ACCESS_KEY": s3["s3.secret-access-key"],
        "AWS_REGION": s3["s3.region"],
    }


def delta_rs_rows(
    location: str, version: int | None = None, s3: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every row of the Delta table at ``location`` (at ``version``) as delta-rs reads it."""
    from deltalake import DeltaTable

    options = delta_rs_storage_options(s3) if s3 else None
    table = DeltaTable(location, version=version, storage_options=options)
    return table.to_pyarrow_table().to_pylist()  # type: ignore[no-any-return]


def delta_rs_query_rows(location: str, version: int | None = None) -> list[dict[str, Any]]:
    """Every row (of ``version``, default the newest) as delta-rs's query engine
    (DataFusion) reads it: unlike ``to_pyarrow_table`` it applies deletion vectors and
    column mapping."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(location, version=version)
    result = QueryBuilder().register("t", table).execute("SELECT * FROM t")
    return pa.table(result.read_all()).to_pylist()  # type: ignore[no-any-return]


def delta_rs_version(location: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(location).version())


def duckdb_delta_rows(
    location: str, version: int | None = None, s3: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every row as DuckDB's delta extension reads it."""
    return duckdb_delta_versions(location, [version], s3)[0]


def _duckdb_s3(con: duckdb.DuckDBPyConnection, s3: Mapping[str, str]) -> None:
    """httpfs loaded from its package, and a secret for the S3 server ``s3`` names."""
    con.execute(f"LOAD '{_extension_file('duckdb_extension_httpfs')}'")
    endpoint = urlparse(s3["s3.endpoint"])
    con.execute(
        "CREATE SECRET (TYPE S3, KEY_ID ?, SECRET ?, REGION ?, ENDPOINT ?, "
        "URL_STYLE 'path', USE_SSL ?)",
        [
            s3["s3.access-key-id"],
            s3["s3.secret-access-key"],
            s3["s3.region"],
            endpoint.netloc,
            endpoint.scheme == "https",
        ],
    )


def duckdb_delta_versions(
    location: str, versions: Sequence[int | None], s3: Mapping[str, str] | None = None
) -> list[list[dict[str, Any]]]:
    """The rows at each of ``versions`` (None: the newest), read on one connection."""
    con = duckdb.connect()
    try:
        path = _extension_file("duckdb_extension_delta").replace("'", "''")
        con.execute(f"LOAD '{path}'")
        if s3:
            _duckdb_s3(con, s3)
        loc = location.replace("'", "''")
        out = []
        for version in versions:
            at = f", version={int(version)}" if version is not None else ""
            cur = con.execute(f"SELECT * FROM delta_scan('{loc}'{at})")
            names = [d[0] for d in cur.description]
            out.append([dict(zip(names, row, strict=True)) for row in cur.fetchall()])
        return out
    finally:
        con.close()


def by_key(rows: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """Rows sorted by ``keys`` (order-insensitive comparison)."""
    return sorted(rows, key=lambda r: tuple((r[k] is None, r[k]) for k in keys))
