"""Catalogs: where a table's current metadata file is recorded, and the atomic swap of it."""

from stream_sink.table.catalog.base import (
    Catalog,
    Identifier,
    TableFactory,
    TableT,
    to_identifier,
)
from stream_sink.table.catalog.hadoop import HadoopCatalog
from stream_sink.table.catalog.sql import SqlCatalog

__all__ = [
    "Catalog",
    "HadoopCatalog",
    "Identifier",
    "SqlCatalog",
    "TableFactory",
    "TableT",
    "to_identifier",
]
