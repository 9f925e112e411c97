"""The sink writing Spark rows into a format version 3 table with ``timestamptz_ns``,
``timestamp_ns`` and ``unknown`` columns: Spark's timestamps are microseconds, widened
exactly into the nanosecond columns (Apache Iceberg's own Spark integration refuses such
tables; it has no nanosecond type). Read back by ours and, after equality-delete
conversion, pyiceberg (DuckDB 1.5 reads no table with a ``timestamptz_ns`` column)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from readers import pyiceberg_table
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.spark import IcebergSink

TABLE = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("at", pa.timestamp("ns", "UTC")),
     pa.field("local", pa.timestamp("ns")), pa.field("u", pa.null())]
)  # fmt: skip
SPARK_SCHEMA = "id long, at timestamp, local timestamp_ntz, seq long"
AT = 1_700_000_000_123_456  # microseconds
LOCAL = -1  # one microsecond before the epoch


def batch(ids: list[int], shift: int) -> list[dict[str, Any]]:
    out = []
    for i in ids:
        at = pa.scalar(AT + shift + i, pa.timestamp("us", "UTC")).as_py().isoformat()
        local = pa.scalar(LOCAL + shift + i, pa.timestamp("us")).as_py().isoformat()
        out.append({"id": i, "at": at, "local": local, "seq": shift + i})
    return out


def test_the_sink_writes_spark_timestamps_into_nanosecond_columns(
    spark: Any, tmp_path: Path
) -> None:
    catalog = ss.load_catalog("t", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    catalog.create_table("db.t", TABLE, identifier_fields=["id"], format_version=3)
    write_batches(tmp_path / "in", [batch([1, 2, 3], 0), batch([2, 4], 1000)])
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        mode="upsert",
        order_by="seq",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    try:
        run_available(
            spark, tmp_path / "in", SPARK_SCHEMA, sink.foreach_batch, sink.spark_checkpoint_location
        )
    finally:
        sink.close()

    def micros(i: int, shift: int) -> tuple[int, int, int, None]:
        return (i, (AT + shift + i) * 1000, (LOCAL + shift + i) * 1000, None)

    want = [micros(1, 0), micros(2, 1000), micros(3, 0), micros(4, 1000)]
    t = catalog.load_table("db.t")
    assert [str(f.field_type) for f in t.schema().fields][1:] == [
        "timestamptz_ns",
        "timestamp_ns",
        "unknown",
    ]
    assert as_tuples(t.scan().to_arrow()) == want
    t.maintenance.convert_equality_deletes()
    assert as_tuples(pyiceberg_table(t.refresh().metadata_location).scan().to_arrow()) == want


def as_tuples(table: pa.Table) -> list[tuple[Any, ...]]:
    at, local = (table[c].cast(pa.int64()).to_pylist() for c in ("at", "local"))
    return sorted(zip(table["id"].to_pylist(), at, local, table["u"].to_pylist(), strict=True))
