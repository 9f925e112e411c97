"""``load_catalog``: the entry point users call to open a catalog; ``load_static_table``:
one table opened from its metadata file, without its catalog (read-only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stream_sink.exceptions import InvalidOptionError
from stream_sink.table.catalog import Catalog, HadoopCatalog, TableFactory

if TYPE_CHECKING:
    from stream_sink.tables import IcebergTable, StaticTable

CATALOG_TYPES = ("hadoop", "sql", "rest")


def load_catalog(
    name: str,
    *,
    type: str = "hadoop",
    warehouse: str | None = None,
    uri: str | None = None,
    table_factory: TableFactory[IcebergTable] | None = None,
    **properties: Any,
) -> Catalog[IcebergTable]:
    """Open catalog ``name``.

    ``type="hadoop"``: tables under the ``warehouse`` directory (local filesystem),
    laid out as Java's HadoopCatalog. ``type="sql"``: the Iceberg JDBC catalog
    schema in the database at ``uri`` (``sqlite:///catalog.db`` or
    ``postgresql://user@host/db``), new tables under ``warehouse`` (any location
    FileIO supports, including ``s3://``). Other keyword options become catalog
    properties; pass dotted names as ``**{"s3.endpoint": ...}``
    (``s3.*``, ``jdbc.user``, ``jdbc.password``, ``sqlite.busy-timeout-ms``).
    ``type="rest"``: an Iceberg REST catalog server at ``uri`` (``warehouse`` is sent to
    its ``/v1/config``); properties as pyiceberg names them (``credential``, ``token``,
    ``scope``, ``oauth2-server-uri``, ``rest.sigv4-enabled``, ``rest.signing-region``,
    ``rest.signing-name``, ``header.*``, ``s3.*``); needs ``pip install 'stream_sink[rest]'``.
    """
    props = {str(k): str(v) for k, v in properties.items()}
    if table_factory is None:
        from stream_sink.tables import IcebergTable as table_factory  # append/scan on loaded tables
    kind = type.strip().lower()
    if kind == "hadoop":
        if uri is not None:
            raise InvalidOptionError(
                f"catalog {name!r}: type='hadoop' takes warehouse=, not uri= "
                "(use type='sql' for a database catalog)"
            )
        if not warehouse:
            raise InvalidOptionError(f"catalog {name!r}: type='hadoop' needs warehouse=<dir>")
        return HadoopCatalog(name, warehouse, props, table_factory)
    if kind in ("sql", "jdbc"):
        if not uri:
            raise InvalidOptionError(
                f"catalog {name!r}: type='sql' needs uri= (sqlite:///catalog.db or postgresql://...)"
            )
        from stream_sink.table.catalog.sql import SqlCatalog

        return SqlCatalog(name, uri, warehouse, props, table_factory)
    if kind == "rest":
        if not uri:
            raise InvalidOptionError(
                f"catalog {name!r}: type='rest' needs uri= (the server's base URL, http(s)://...)"
            )
        from stream_sink.table.catalog.rest import RestCatalog

        return RestCatalog(name, uri, warehouse, props, table_factory)
    raise InvalidOptionError(
        f"catalog {name!r}: unknown type {type!r} (expected one of {', '.join(CATALOG_TYPES)})"
    )


def load_static_table(location: str, **properties: Any) -> StaticTable:
    """The Iceberg table whose metadata is at ``location``, read-only, as pyiceberg's
    ``StaticTable.from_metadata`` and DuckDB's ``iceberg_scan`` open one.

    ``location``: a metadata file (``v3.metadata.json``, ``00001-<uuid>.metadata.json``,
    gzip ones too), or a table's directory (or its ``metadata/``), where the file its
    ``version-hint.text`` names is read, else the one with the highest version in its
    name. Keyword options are FileIO properties (``s3.endpoint``, ``s3.access-key-id``...).
    Scans, time travel and ``stream-sink`` inspection work as on any table; every write
    raises ReadOnlyTableError before writing anything.
    """
    from stream_sink.io import FileIO
    from stream_sink.table.catalog.static import StaticCatalog, static_metadata_location
    from stream_sink.tables import StaticTable

    props = {str(k): str(v) for k, v in properties.items()}
    metadata = static_metadata_location(location, FileIO.for_location(location, props))
    return StaticCatalog(metadata, props, StaticTable).open()
