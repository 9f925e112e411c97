"""Tables whose data files Spark's own Parquet writer wrote (``write_route="spark"``),
read back row for row by our scan, DuckDB, pyiceberg and Java Iceberg.

The wide rows of ``interop_data`` cut to the columns Spark writes with Iceberg's field
ids (every primitive but fixed and uuid, nested structs; no lists or maps), streamed in
two micro-batches into one table per partition shape: unpartitioned, identity, bucket
(our transform in a Python UDF), truncate and the time transforms, void. Every data
file must be Spark's (``part-…``) and every reader must return exactly the rows written.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop_data import SCHEMA, rows
from readers import canonical_rows, duckdb_columns, pyiceberg_rows

import stream_sink as ss
from stream_sink.spark import IcebergSink
from stream_sink.table.conversions import from_bytes
from stream_sink.table.schema import Schema

pytestmark = pytest.mark.spark

COLUMNS = ("id", "flag", "i", "l", "f", "d", "dec", "dec38", "dt", "ts", "tstz", "s", "bin", "st")
SPARK_SCHEMA = Schema(*(f for f in SCHEMA.fields if f.name in COLUMNS))
SHAPES: dict[str, tuple[tuple[Any, ...], ...]] = {
    "unpartitioned": (),
    "identity": tuple(("identity", c) for c in ("flag", "i", "l", "dt", "tstz", "s")),
    "bucket": (
        ("bucket", "i", 16),
        ("bucket", "l", 16),
        ("bucket", "s", 8),
        ("bucket", "dt", 5),
        ("bucket", "dec", 7),
        ("bucket", "bin", 3),
    ),
    "truncate_day": (
        ("truncate", "i", 10),
        ("truncate", "l", 100),
        ("truncate", "s", 2),
        ("day", "tstz"),
        ("month", "dt"),
    ),
    "hour_year_void": (("hour", "tstz"), ("year", "dt"), ("void", "i")),
}
SPLIT = 20


@pytest.fixture(scope="module")
def written(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("spark-route")
    data = rows().select(list(COLUMNS))
    source = root / "in"
    source.mkdir()
    base = time.time() - 1000
    for i, part in enumerate((data.slice(0, SPLIT), data.slice(SPLIT))):
        path = source / f"part-{i}.parquet"
        pq.write_table(part, path)
        os.utime(path, (base + i, base + i))
    catalog = ss.load_catalog("spark_route", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    schema = spark.read.parquet(str(source)).schema
    tables = {}
    for name, spec in SHAPES.items():
        catalog.create_table(f"db.{name}", SPARK_SCHEMA, list(spec))
        sink = IcebergSink(
            catalog=catalog,
            table=f"db.{name}",
            checkpoint_location=str(root / "chk" / name),
            state_dir=str(root / "state" / name),
            write_route="spark",
        )
        query = (
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .writeStream.foreachBatch(sink.foreach_batch)
            .option("checkpointLocation", sink.spark_checkpoint_location)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        sink.close()
        tables[name] = catalog.load_table(f"db.{name}")
    return {"tables": tables, "expected": canonical_rows(data.to_pylist(), SPARK_SCHEMA)}


@pytest.mark.parametrize("name", list(SHAPES))
def test_spark_wrote_every_file_and_our_scan_and_duckdb_agree(
    written: dict[str, Any], name: str
) -> None:
    table = written["tables"][name]
    assert [s.summary["operation"] for s in table.snapshots()] == ["append", "append"]
    paths = [Path(f.file_path.removeprefix("file:")) for f in table.scan().plan_files()]
    assert paths and all(p.name.startswith("part-") for p in paths)
    for p in paths:  # the source columns stay inside the files; no partition columns
        assert pq.read_schema(p).names == list(COLUMNS)
    expected = written["expected"]
    got = table.scan().to_arrow().to_pylist()
    assert canonical_rows(got, SPARK_SCHEMA) == expected
    duck = duckdb_columns(table.metadata_location, list(COLUMNS))
    assert canonical_rows(duck, SPARK_SCHEMA, list(COLUMNS)) == expected


def test_metrics_from_spark_footers_count_nulls_and_nans(written: dict[str, Any]) -> None:
    """NaN is in no footer: it is counted from the data, and kept out of the bounds."""
    table = written["tables"]["unpartitioned"]
    files = [t.data_file for t in table.scan().plan_files()]
    data = rows().select(list(COLUMNS))
    for name in ("f", "d"):
        fid = SPARK_SCHEMA.find_field(name).field_id
        values = data.column(name).to_pylist()
        nans = sum(1 for v in values if v is not None and v != v)
        assert (nans > 0) == (name == "d")  # the rows hold NaN in d (f has -0.0, inf)
        assert sum(f.nan_value_counts[fid] for f in files) == nans
        assert sum(f.null_value_counts[fid] for f in files) == values.count(None)
        t = SPARK_SCHEMA.find_field(name).field_type
        bounds = [from_bytes(t, f.upper_bounds[fid]) for f in files]
        bounds += [from_bytes(t, f.lower_bounds[fid]) for f in files]
        assert not any(math.isnan(b) for b in bounds)
    assert sum(f.record_count for f in files) == data.num_rows


@pytest.mark.parametrize("name", list(SHAPES))
def test_pyiceberg_reads_spark_written_files(written: dict[str, Any], name: str) -> None:
    got = pyiceberg_rows(written["tables"][name].metadata_location)
    assert canonical_rows(got, SPARK_SCHEMA, list(COLUMNS)) == written["expected"]


@pytest.mark.interop
def test_java_iceberg_reads_spark_written_files(written: dict[str, Any], java_read: Any) -> None:
    names = list(SHAPES)
    tables = java_read([written["tables"][n].metadata_location for n in names])
    for name, got in zip(names, tables, strict=True):
        assert isinstance(got, pa.Table)
        assert canonical_rows(got.to_pylist(), SPARK_SCHEMA) == written["expected"], name
