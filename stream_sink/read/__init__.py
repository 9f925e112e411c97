"""Reading Iceberg tables: scan planning, delete application, Arrow results."""

from __future__ import annotations

from stream_sink.read.expressions import Expression, col
from stream_sink.read.filter_parser import parse_filter
from stream_sink.read.planner import FileScanTask
from stream_sink.read.scan import IncrementalAppendScan, TableScan

__all__ = [
    "Expression",
    "FileScanTask",
    "IncrementalAppendScan",
    "TableScan",
    "col",
    "parse_filter",
]
