"""Independent readers of Delta tables: delta-rs (``deltalake``) and DuckDB's delta
extension (loaded offline from its PyPI package, like the iceberg extension)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
from readers import _extension_file


def delta_rs_rows(location: str, version: int | None = None) -> list[dict[str, Any]]:
    """Every row of the Delta table at ``location`` (at ``version``) as delta-rs reads it."""
    from deltalake import DeltaTable

    table = DeltaTable(location, version=version)
    return table.to_pyarrow_table().to_pylist()  # type: ignore[no-any-return]


def delta_rs_version(location: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(location).version())


def duckdb_delta_rows(location: str, version: int | None = None) -> list[dict[str, Any]]:
    """Every row as DuckDB's delta extension reads it."""
    return duckdb_delta_versions(location, [version])[0]


def duckdb_delta_versions(
    location: str, versions: Sequence[int | None]
) -> list[list[dict[str, Any]]]:
    """The rows at each of ``versions`` (None: the newest), read on one connection."""
    con = duckdb.connect()
    try:
        path = _extension_file("duckdb_extension_delta").replace("'", "''")
        con.execute(f"LOAD '{path}'")
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
