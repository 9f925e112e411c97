"""The Spark adapter: ``IcebergSink`` for ``foreachBatch``, CDC helpers, a local session.

Only this package imports pyspark, and only inside functions, so importing it works
without a JVM.
"""

from __future__ import annotations

from stream_sink.spark.cdc import ORDER_COLUMN, ROW_KIND_COLUMN, from_debezium
from stream_sink.spark.read import read_table
from stream_sink.spark.session import local_session
from stream_sink.spark.sink import IcebergSink

__all__ = [
    "ORDER_COLUMN", "ROW_KIND_COLUMN", "IcebergSink", "from_debezium", "local_session",
    "read_table",
]
