"""The copy-on-write half of a Delta MERGE: the live files holding a batch's keys are
removed and their other rows written again (see :mod:`stream_sink.delta.merge`).

Where the batch's distinct keys are held:

- Up to ``driver_key_limit`` keys: on the driver (one Arrow table). Files are pruned by
  the keys' lowest and highest value per column (their statistics) and partition values,
  and one task per file reads it and anti-joins the keys away (:class:`DeltaRewriteTask`).
- Beyond it the keys stay on the executors: one aggregate gives each key column's
  lowest and highest value (and a partition key column's values, when they are few) to
  prune files; the candidate files are read by tasks (:class:`DeltaReadTask`), a
  semi-join with the keys finds the files that hold one, and an anti-join their rows to
  keep, which are written as new files (:class:`DeltaAppendTask`). The driver holds file
  lists only.

Invariants:
- Both ways remove exactly the live files holding a touched key and keep every other row
  of them; a file without a touched key is left alone.
- The driver never holds more than ``driver_key_limit`` + 1 keys of a batch (or as many
  values of a partition key column).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from stream_sink.delta.actions import AddFile
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.merge import files_for_keys, touched_files
from stream_sink.delta.snapshot import DeltaSnapshot
from stream_sink.spark import schema_check
from stream_sink.spark.foreach_batch.arrow_frames import to_arrow
from stream_sink.spark.tasks.delta import (
    FILE_COLUMN,
    PATH_COLUMN,
    DeltaAppendTask,
    DeltaReadTask,
    DeltaRewriteTask,
    TableShape,
    merge_batches,
)
from stream_sink.spark.tasks.shared import RESULT_COLUMN, RESULT_DDL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_MAX_LIMIT = 2**31 - 2
"""Spark's ``limit`` takes an int: a larger ``driver_key_limit`` means this one."""


def rewrite_touched_files(
    keys_df: DataFrame,
    snapshot: DeltaSnapshot,
    shape: TableShape,
    keys: Sequence[str],
    driver_key_limit: int,
) -> DeltaBatch:
    """The removes and re-written rows for the batch's distinct keys ``keys_df`` (its
    columns: ``keys``, typed as the table's)."""
    driver_key_limit = min(driver_key_limit, _MAX_LIMIT)
    head = to_arrow(keys_df.limit(driver_key_limit + 1))
    if head.num_rows <= driver_key_limit:
        return _on_driver(keys_df, head, snapshot, shape, keys)
    return _on_executors(keys_df, snapshot, shape, keys, driver_key_limit)


def _on_driver(
    keys_df: DataFrame,
    touched: pa.Table,
    snapshot: DeltaSnapshot,
    shape: TableShape,
    keys: Sequence[str],
) -> DeltaBatch:
    touched = pa.Table.from_arrays(
        [touched.column(k).cast(snapshot.arrow_schema.field(k).type) for k in keys],
        names=list(keys),
    )
    files = touched_files(snapshot, touched)
    if not files:
        return DeltaBatch(())
    task = DeltaRewriteTask(shape, tuple(keys), touched, int(time.time() * 1000))
    return _collect(_files_df(keys_df, files).mapInArrow(task, RESULT_DDL))


def _on_executors(
    keys_df: DataFrame,
    snapshot: DeltaSnapshot,
    shape: TableShape,
    keys: Sequence[str],
    limit: int,
) -> DeltaBatch:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField

    files = _candidates(keys_df, snapshot, keys, limit)
    if not files:
        return DeltaBatch(())
    spark_schema = _spark_schema(snapshot.arrow_schema)
    spark_schema.add(StructField(FILE_COLUMN, StringType(), False))
    out = schema_check.spark_to_arrow(spark_schema, f"Delta table {snapshot.location}")
    rows = _files_df(keys_df, files).mapInArrow(DeltaReadTask(shape, out), spark_schema)
    rows = rows.persist()
    try:
        holding = rows.join(keys_df, list(keys), "left_semi").select(FILE_COLUMN).distinct()
        hits = sorted(r[0] for r in holding.collect())
        if not hits:
            return DeltaBatch(())
        kept = (
            rows.where(F.col(FILE_COLUMN).isin(hits))
            .join(keys_df, list(keys), "left_anti")
            .select(*snapshot.arrow_schema.names)
        )
        written = _collect(kept.mapInArrow(DeltaAppendTask(shape), RESULT_DDL))
    finally:
        rows.unpersist()
    now = int(time.time() * 1000)
    by_path = {a.path: a for a in files}
    return DeltaBatch(written.adds, tuple(by_path[p].remove(now) for p in hits))


def _candidates(
    keys_df: DataFrame, snapshot: DeltaSnapshot, keys: Sequence[str], limit: int
) -> list[AddFile]:
    """Live files that may hold a key, from the keys' bounds (computed by the executors)."""
    from pyspark.sql import functions as F

    ranged = [k for k in keys if k not in snapshot.partition_columns]
    partitions: dict[str, list[Any]] = {}
    for k in keys:
        if k in snapshot.partition_columns:
            values = keys_df.select(k).distinct().limit(limit + 1).collect()
            if len(values) <= limit:  # else: no pruning by this column
                partitions[k] = [r[0] for r in values]
    ranges: dict[str, tuple[Any, Any]] = {}
    if ranged:
        aggs = [F.min(k).alias(f"lo{i}") for i, k in enumerate(ranged)]
        aggs += [F.max(k).alias(f"hi{i}") for i, k in enumerate(ranged)]
        row = keys_df.agg(*aggs).collect()[0]
        if row["lo0"] is None:
            return []  # no keys
        ranges = {k: (row[f"lo{i}"], row[f"hi{i}"]) for i, k in enumerate(ranged)}
    return files_for_keys(snapshot, ranges, partitions)


def _files_df(keys_df: DataFrame, files: Sequence[AddFile]) -> DataFrame:
    spark = keys_df.sparkSession
    rows = [(json.dumps(a.to_json()),) for a in files]
    parallelism = spark.sparkContext.defaultParallelism
    return spark.createDataFrame(rows, f"{PATH_COLUMN} string").repartition(
        min(len(rows), parallelism)
    )


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _collect(df: Any) -> DeltaBatch:
    return merge_batches([bytes(r[RESULT_COLUMN]) for r in df.collect()])
