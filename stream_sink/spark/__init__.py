"""The Spark adapter, by front door:

- ``foreach_batch/``: ``IcebergSink`` (one table, or many routed by a column) and
  ``DeltaSink`` for ``writeStream.foreachBatch``;
- ``datasource/``: ``format("stream_sink")``, Spark's Python Data Source (pyspark >= 4.0),
  into Iceberg or Delta;
- ``read/``: ``read_table``, an Iceberg table as a DataFrame;
- ``cdc/``: Debezium events to a changelog, control columns, per-key distribution,
  ordering guards and ties, used by the front doors;
- at this level, what they share: the session, options, errors, schema checks, the
  batch plan and schema evolution, the executors' write tasks, the query id from
  Spark's checkpoint, the committer of an Iceberg table.

Every front door hands the commit protocol to :mod:`stream_sink.commit.driver`. Only
this package imports pyspark, and only inside functions, so importing it works
without a JVM.

The public names are loaded on first use: Spark's Python workers import this package
to unpickle the executor functions (``tasks/``, ``read.tasks``), and should not pay
for the driver's modules (catalogs, planning) in start-up time and in the garbage
collection Spark runs after every task.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stream_sink.spark.cdc.debezium import (
        ORDER_COLUMN,
        ROW_KIND_COLUMN,
        debezium_row_schema,
        from_debezium,
    )
    from stream_sink.spark.datasource.register import register
    from stream_sink.spark.foreach_batch.delta import DeltaSink
    from stream_sink.spark.foreach_batch.iceberg import IcebergSink
    from stream_sink.spark.preflight import check_executors
    from stream_sink.spark.read.dataframe import read_table
    from stream_sink.spark.session import local_session

_EXPORTS = {
    "ORDER_COLUMN": "cdc.debezium",
    "ROW_KIND_COLUMN": "cdc.debezium",
    "from_debezium": "cdc.debezium",
    "debezium_row_schema": "cdc.debezium",
    "read_table": "read.dataframe",
    "check_executors": "preflight",
    "register": "datasource.register",
    "local_session": "session",
    "IcebergSink": "foreach_batch.iceberg",
    "DeltaSink": "foreach_batch.delta",
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
