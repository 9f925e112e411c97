"""How a micro-batch is spread over the write tasks.

- ``none``: as the source delivered it (a partitioned table's fanout writer then opens a
  file per partition in every task).
- ``hash``: rows of one table partition go to one task (clustering expressions below).
- ``range``: range-partitioned and sorted by the table's sort order (partition columns
  when the table is unsorted).
- CDC modes, whatever the option: hash by the equality key (``range`` uses a range on the
  key) and sort within each task by (key, order columns). That is the correctness rule
  of CDC: every change of one key reaches one task, in source order. (A CDC batch
  Spark reads in one small partition skips all this: see
  :mod:`stream_sink.spark.foreach_batch.single_task`.)

Invariant: distribution only moves and orders rows; it never drops or changes one.
Clustering expressions approximate the partition transforms (bucket hashes by its source
column); they affect file counts, never correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.schema import Schema
from stream_sink.table.sorting import SortDirection, SortOrder
from stream_sink.table.transforms import Bucket, Day, Hour, Month, Truncate, Void, Year

_TIME_UNITS = {Year: "year", Month: "month", Day: "day", Hour: "hour"}

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def distribute_cdc(
    df: DataFrame,
    keys: Sequence[str | Column],
    order_by: Sequence[str],
    *,
    by_range: bool = False,
    clustering: Sequence[Column] = (),
) -> DataFrame:
    """Every change of a key in one task, ordered by (key, order columns).

    ``keys``: column names, or expressions of them (a routed batch masks the key
    columns of other tables). ``clustering``, when given, must be functions of key
    columns only (see :func:`key_clustering`); rows are then hashed by it, so each table
    partition is written by one task and every change of a key still meets in that task.
    """
    key_cols = [column(k) if isinstance(k, str) else k for k in keys]
    if by_range:
        spread = df.repartitionByRange(*key_cols)
    else:
        spread = df.repartition(*(clustering or key_cols))
    return spread.sortWithinPartitions(*key_cols, *(column(c) for c in order_by))


def key_clustering(spec: PartitionSpec, schema: Schema, keys: Sequence[str]) -> list[Column]:
    """Partition clustering expressions when every partition source column is a key
    column (then they depend on the key only); empty otherwise or when only buckets
    would remain."""
    sources = {
        schema.find_column_name(f.source_id)
        for f in spec.fields
        if not isinstance(f.transform, Void)
    }
    if not sources or not sources <= set(keys):
        return []
    if all(isinstance(f.transform, (Bucket, Void)) for f in spec.fields):
        return []
    return partition_clustering(spec, schema)


def distribute_append(
    df: DataFrame, mode: str, spec: PartitionSpec, schema: Schema, order: SortOrder
) -> DataFrame:
    """``mode`` is ``none``, ``hash`` or ``range`` (append and overwrite sinks)."""
    if mode == "none":
        return df
    clustering = partition_clustering(spec, schema)
    if mode == "hash":
        return df.repartition(*clustering) if clustering else df
    sort_cols = sort_columns(order, schema) or clustering
    if not sort_cols:
        return df
    return df.repartitionByRange(*sort_cols).sortWithinPartitions(*sort_cols)


def partition_clustering(spec: PartitionSpec, schema: Schema) -> list[Column]:
    """Spark expressions whose values group rows like the partition does.

    Bucket fields are left out when other fields exist (Spark cannot compute Iceberg's
    bucket hash; hashing by the bucket's source column would scatter each bucket over
    every task); a spec of buckets only clusters by their source columns.
    """
    from pyspark.sql import functions as F

    exact: list[Column] = []
    buckets: list[Column] = []
    for field in spec.fields:
        t = field.transform
        src = column(schema.find_column_name(field.source_id))
        if isinstance(t, Void):
            continue
        if isinstance(t, Bucket):
            buckets.append(src)
        elif isinstance(t, (Year, Month, Day, Hour)):
            exact.append(F.date_trunc(_TIME_UNITS[type(t)], src))
        elif isinstance(t, Truncate) and _is_string(schema, field.source_id):
            exact.append(F.substring(src, 1, t.width))
        else:  # identity, numeric truncate: the source column
            exact.append(src)
    return exact or buckets


def sort_columns(order: SortOrder, schema: Schema) -> list[Column]:
    """The table's sort order on source columns (transforms other than identity are
    approximated by their source, which keeps monotonic transforms' order)."""
    cols = []
    for f in order.fields:
        c = column(schema.find_column_name(f.source_id))
        asc = f.direction is SortDirection.ASC
        nulls_first = f.null_order.value == "nulls-first"
        if asc:
            cols.append(c.asc_nulls_first() if nulls_first else c.asc_nulls_last())
        else:
            cols.append(c.desc_nulls_first() if nulls_first else c.desc_nulls_last())
    return cols


def _is_string(schema: Schema, field_id: int) -> bool:
    return str(schema.find_type(field_id)) == "string"


def column(name: str) -> Column:
    """A top-level column by its exact name (dots in a name are not paths)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")
