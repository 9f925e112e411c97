"""The Iceberg REST catalog: ``load_catalog(name, type="rest", uri=..., warehouse=...)``."""

from stream_sink.table.catalog.rest.catalog import RestCatalog

__all__ = ["RestCatalog"]
