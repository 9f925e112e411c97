"""DuckDB's iceberg (or delta) extension as a second, independent reader of a drilled table.

DuckDB and its extension packages (``duckdb-extension-iceberg``, ``duckdb-extension-avro``,
same version as ``duckdb``) are optional: :func:`available` says whether they are
installed. The extensions are loaded from the files inside those packages (no network).
"""

from __future__ import annotations

import glob
import importlib
import os

import pyarrow as pa

EXTENSION_PACKAGES = ("duckdb_extension_avro", "duckdb_extension_iceberg")
DELTA_EXTENSION_PACKAGES = ("duckdb_extension_delta",)


def available(packages: tuple[str, ...] = EXTENSION_PACKAGES) -> bool:
    try:
        importlib.import_module("duckdb")
        return all(_extension_file(p) for p in packages)
    except ImportError:
        return False


def read_table(metadata_location: str, columns: list[str]) -> pa.Table:
    """``columns`` of every live row of the Iceberg table at ``metadata_location``."""
    return _scan(EXTENSION_PACKAGES, f"iceberg_scan('{_quote(metadata_location)}')", columns)


def read_delta_table(location: str, columns: list[str]) -> pa.Table:
    """``columns`` of every row of the Delta table at ``location`` (delta extension)."""
    return _scan(DELTA_EXTENSION_PACKAGES, f"delta_scan('{_quote(location)}')", columns)


def _scan(packages: tuple[str, ...], source: str, columns: list[str]) -> pa.Table:
    import duckdb

    con = duckdb.connect()
    try:
        for package in packages:
            path = _extension_file(package)
            if path is None:
                raise ImportError(f"no .duckdb_extension file inside package {package}")
            con.execute(f"LOAD '{_quote(path)}'")
        select = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        result = con.execute(f"SELECT {select} FROM {source}").to_arrow_table()
        return result if isinstance(result, pa.Table) else pa.table(result)
    finally:
        con.close()


def _extension_file(package: str) -> str | None:
    module = importlib.import_module(package)
    root = os.path.dirname(module.__file__ or "")
    found = sorted(glob.glob(os.path.join(root, "**", "*.duckdb_extension"), recursive=True))
    return found[-1] if found else None


def _quote(text: str) -> str:
    return text.replace("'", "''")
