"""The Spark adapter: ``IcebergSink`` for ``foreachBatch``, CDC helpers, a local session.

Only this package imports pyspark, and only inside functions, so importing it works
without a JVM.

The public names are loaded on first use: Spark's Python workers import this package
to unpickle the executor functions (``executor``, ``read_tasks``), and should not pay
for the driver's modules (catalogs, planning) in start-up time and in the garbage
collection Spark runs after every task.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stream_sink.spark.cdc import (
        ORDER_COLUMN,
        ROW_KIND_COLUMN,
        debezium_row_schema,
        from_debezium,
    )
    from stream_sink.spark.delta_sink import DeltaSink
    from stream_sink.spark.preflight import check_executors
    from stream_sink.spark.read import read_table
    from stream_sink.spark.route import register
    from stream_sink.spark.session import local_session
    from stream_sink.spark.sink import IcebergSink

_EXPORTS = {
    "ORDER_COLUMN": "cdc",
    "ROW_KIND_COLUMN": "cdc",
    "from_debezium": "cdc",
    "debezium_row_schema": "cdc",
    "read_table": "read",
    "check_executors": "preflight",
    "register": "route",
    "local_session": "session",
    "IcebergSink": "sink",
    "DeltaSink": "delta_sink",
}

__all__ = [
    "ORDER_COLUMN",
    "ROW_KIND_COLUMN",
    "DeltaSink",
    "IcebergSink",
    "debezium_row_schema",
    "from_debezium",
    "local_session",
    "read_table",
    "register",
    "check_executors",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
