"""Reading an Iceberg table as a Spark DataFrame, distributed over executors.

``read_table(spark, table, snapshot_id=|ref=|as_of_ms=, row_filter=, columns=)`` plans
the scan on the driver (manifests, partitions and column bounds prune files, as in
``table.scan()``), packs the file scan tasks into splits and reads each split in its
own Spark partition with the project's TaskReader, deletes applied with Arrow.

Invariants:
- Rows equal ``table.scan(...).to_arrow()`` of the same arguments, in the Spark types
  of ``stream_sink.spark.read.types`` (uuid as string, timestamp as TIMESTAMP_NTZ,
  timestamptz as TIMESTAMP, fixed as BINARY, time as TIME(6) where Spark enables TIME,
  else microseconds since midnight as BIGINT).
- Bad input (a snapshot, ref or time that does not exist, an unknown column, a filter
  that does not bind) raises on the driver, from ``read_table`` itself. Errors reading
  files happen when Spark runs the read (an action) and name the file and table.
- A scan with no files gives an empty DataFrame of the same schema.
- Splits: a file is never cut; consecutive files are packed up to
  ``read.split.target-size`` bytes (default 128 MiB; each file counts at least
  ``read.split.open-file-cost``, default 4 MiB), the target lowered so that a small
  scan still spreads over Spark's default parallelism. ``split_size`` overrides both.
- The DataFrame is built from ``sparkContext``: a classic (not Spark Connect) session.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from stream_sink.exceptions import InvalidOptionError
from stream_sink.read.scan import IncrementalAppendScan, RowFilter, TableScan
from stream_sink.spark.read import tasks as read_tasks
from stream_sink.spark.read.types import spark_arrow_schema, spark_schema
from stream_sink.table.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from stream_sink.read.planner import FileScanTask


def read_table(
    spark: SparkSession,
    table: Table,
    *,
    snapshot_id: int | None = None,
    ref: str | None = None,
    as_of_ms: int | None = None,
    row_filter: RowFilter = None,
    columns: Iterable[str] | None = None,
    split_size: int | None = None,
) -> DataFrame:
    """``table`` (one snapshot, the current one by default) as a DataFrame; see the module
    invariants. ``split_size``: bytes per Spark partition (overrides the table's
    ``read.split.target-size`` and the adaptation to the cluster's parallelism)."""
    scan = TableScan(
        table,
        snapshot_id=snapshot_id,
        ref=ref,
        as_of_ms=as_of_ms,
        row_filter=row_filter,
        columns=columns,
    )
    return read_scan(spark, scan, split_size=split_size)


def read_scan(
    spark: SparkSession,
    scan: TableScan | IncrementalAppendScan,
    *,
    split_size: int | None = None,
) -> DataFrame:
    """A DataFrame of a planned scan (a table scan or an incremental append scan)."""
    time_type = _conf_true(spark, "spark.sql.timeType.enabled")
    schema = spark_schema(scan.projected_schema.fields, time_type=time_type)
    tasks = scan.plan_files()
    if not tasks:
        return spark.createDataFrame([], schema)
    splits = _splits(spark, scan.table, tasks, split_size)
    target = spark_arrow_schema(
        schema,
        timezone=spark.conf.get("spark.sql.session.timeZone") or "UTC",
        large_types=_conf_true(spark, "spark.sql.execution.arrow.useLargeVarTypes"),
    )
    context = read_tasks.ReadContext.of(
        scan.table, scan.schema, scan.projected_schema.fields, target
    )
    rows = [(i, read_tasks.encode_split(split)) for i, split in enumerate(splits)]
    rdd = spark.sparkContext.parallelize(rows, numSlices=len(rows))
    frame = spark.createDataFrame(rdd, read_tasks.SPLIT_DDL)
    return frame.mapInArrow(read_tasks.ReadSplits(context), schema)


def _splits(
    spark: SparkSession, table: Table, tasks: list[FileScanTask], split_size: int | None
) -> list[list[FileScanTask]]:
    props = table.properties
    cost = read_tasks.size_property(
        props, read_tasks.OPEN_FILE_COST_PROPERTY, read_tasks.DEFAULT_OPEN_FILE_COST, table.name
    )
    if split_size is not None:
        if split_size <= 0:
            raise InvalidOptionError(
                f"read of table {table.name}: split_size must be positive, got {split_size}"
            )
        return read_tasks.pack_splits(tasks, split_size, cost)
    target = read_tasks.size_property(
        props, read_tasks.SPLIT_SIZE_PROPERTY, read_tasks.DEFAULT_SPLIT_SIZE, table.name
    )
    parallelism = spark.sparkContext.defaultParallelism
    adapted = read_tasks.adaptive_split_size(tasks, parallelism, target, cost)
    return read_tasks.pack_splits(tasks, adapted, cost)


def _conf_true(spark: SparkSession, key: str) -> bool:
    return (spark.conf.get(key, "false") or "false").strip().lower() == "true"
