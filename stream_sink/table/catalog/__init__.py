"""Catalogs: where a table's current metadata file is recorded, and the atomic swap of it.

``SqlCatalog`` is imported on first use: SQLAlchemy takes about a second to import, and
short-lived processes that only open Hadoop catalogs (Spark's Python workers running a
data source commit) should not pay for it.
"""

from typing import TYPE_CHECKING, Any

from stream_sink.table.catalog.base import (
    Catalog,
    Identifier,
    TableFactory,
    TableT,
    to_identifier,
)
from stream_sink.table.catalog.hadoop import HadoopCatalog

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    if name == "SqlCatalog":
        from stream_sink.table.catalog.sql import SqlCatalog

        return SqlCatalog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
