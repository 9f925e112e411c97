"""stream_sink.spark.datasource.delta.options: ``event-time-column`` on
``format("stream_sink")`` reaches the sink's options for both targets, as
``event_time_column`` of ``IcebergSink`` / ``DeltaSink`` does (pure Python, no session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.spark.datasource.delta.options import parse_delta_options
from stream_sink.spark.datasource.options import SourceOptions, parse_route_options
from stream_sink.spark.options import parse_options


def test_the_iceberg_route_passes_the_column_on(tmp_path: Path) -> None:
    given = {
        "table": "db.t",
        "catalog.warehouse": str(tmp_path / "w"),
        "checkpointLocation": str(tmp_path / "chk"),
    }
    opts = parse_route_options({**given, "event-time-column": "at"}, streaming=True)
    assert isinstance(opts, SourceOptions) and opts.sink.event_time_column == "at"
    default = parse_route_options(given, streaming=True)
    assert isinstance(default, SourceOptions) and default.sink.event_time_column is None


def test_the_delta_route_passes_the_column_on_to_the_sink(tmp_path: Path) -> None:
    given = {"target": "delta", "path": str(tmp_path / "lake")}
    given["checkpointLocation"] = str(tmp_path / "chk")
    opts = parse_delta_options({**given, "event-time-column": " at "}, streaming=True)
    assert opts.event_time_column == "at"
    assert opts.sink_kwargs()["event_time_column"] == "at"
    assert parse_delta_options(given, streaming=True).event_time_column is None


def test_a_routed_sink_refuses_an_event_time_column() -> None:
    with pytest.raises(InvalidOptionError, match="event_time_column='at' with table_column"):
        parse_options(table=None, table_column="dest", event_time_column="at")
    assert parse_options(table="db.t", event_time_column=" at ").event_time_column == "at"
    with pytest.raises(InvalidOptionError, match="must be a column name"):
        parse_options(table="db.t", event_time_column="  ")


def test_a_column_the_table_lacks_is_refused_before_any_file_is_written(
    tmp_path: Path,
) -> None:
    """The Iceberg route checks the column when the query plans its write, not at the
    first commit (the executors would have written the batch's files by then)."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StructField, StructType

    import stream_sink as ss
    from stream_sink.spark.datasource.commit import prepare_write

    catalog = ss.load_catalog("et", type="hadoop", warehouse=str(tmp_path / "w"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=pa.schema([pa.field("id", pa.int64())]))
    given = {
        "table": "db.t",
        "catalog.type": "hadoop",
        "catalog.warehouse": str(tmp_path / "w"),
        "checkpointLocation": str(tmp_path / "chk"),
        "event-time-column": "ts",
    }
    schema = StructType([StructField("id", LongType())])
    with pytest.raises(InvalidOptionError, match=r"event_time_column='ts'.*has no such column"):
        prepare_write(given, schema, streaming=True, overwrite=False)
    assert list((tmp_path / "w" / "db" / "t").rglob("*.parquet")) == []
