"""stream_sink: exactly-once streaming writes from Spark into Apache Iceberg (v2, v3) and
Delta Lake tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from stream_sink.catalogs import load_catalog, load_static_table

__all__ = ["load_catalog", "load_static_table"]


def __getattr__(name: str) -> Any:
    # imported on first use, so that ``import stream_sink.x`` stays light
    if name == "load_catalog":
        from stream_sink.catalogs import load_catalog

        return load_catalog
    if name == "load_static_table":
        from stream_sink.catalogs import load_static_table

        return load_static_table
    raise AttributeError(f"module 'stream_sink' has no attribute {name!r}")
