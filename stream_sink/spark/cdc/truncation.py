"""TRUNCATE of a source table inside a change stream (row kind ``-T``).

``from_debezium`` turns Debezium's ``op: t`` into one row of kind :data:`TRUNCATE` at the
truncate's source position (its other columns null). A foreachBatch sink applies it at
that point of the stream: the batch's changes of that table ordered before it are
dropped, the changes after it are written, and the commit of the batch removes every
data and delete file live on the table before adding them (one snapshot or Delta
version, stamped with the batch's watermark, so a replay after a crash neither empties
the table twice nor loses the changes after the truncate).

How the sink finds a truncate without reading every batch twice: the batch is written
as if it held none, through :func:`flagged`, whose filter raises
TruncateInBatchError on a ``-T`` row as the rows are first read, before the writers
(the shuffle's map side, or the JVM side feeding a one-task write, whose task aborts
its writer). Then :func:`last_truncates` finds the position of the last truncate (per
table for a routed sink, in the aggregate that sink runs anyway) and the batch is
written again from :func:`after` it. Batches without a truncate pay one comparison
per row; a batch with one pays a failed first stage (Spark logs the failed task) and a
second read (DeltaSink's from the batch it persisted for its MERGE, not the source).

Invariants:
- The rows :func:`after` keeps hold no ``-T`` row and no change of a truncated table at
  or before its last truncate's position; changes of other tables, and rows whose
  order is null (which the CDC guard then refuses, naming them), are kept.
- Positions compare as the sink orders changes: the ``order_by`` columns as one
  struct, field by field (``from_debezium``'s ``_cdc_order``: ``source.lsn``, then the
  change's place in its event). With ``source.lsn`` that is the source's commit order,
  which orders a truncate against every change of its table only when they reach the
  same micro-batch in that order: a topic with one partition (Debezium sends truncates
  with no key, so on a topic of several partitions it may overtake changes before it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.exceptions import UnsupportedError
from stream_sink.spark.cdc.distribution import column
from stream_sink.spark.errors import spark_error_message

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

TRUNCATE = "-T"
"""Row kind of a TRUNCATE of the source table (beside Flink's +I, -U, +U, -D)."""

_MARKER = "the micro-batch holds a TRUNCATE (row kind -T); written again from after it"


def flagged(df: DataFrame, kind_column: str) -> DataFrame:
    """``df`` with a filter that raises TruncateInBatchError where a row is ``-T``
    (evaluated as the sink's first stage reads the rows, before any shuffle it adds)."""
    from pyspark.sql import functions as F

    message = spark_error_message("TruncateInBatchError", _MARKER)
    is_truncate = column(kind_column) == F.lit(TRUNCATE)
    return df.where(F.when(is_truncate, F.raise_error(F.lit(message))).otherwise(F.lit(True)))


def position(order_by: Sequence[str]) -> Column:
    """The sink's order of a row: its ``order_by`` columns as one struct."""
    from pyspark.sql import functions as F

    return F.struct(*(column(c).alias(f"p{i}") for i, c in enumerate(order_by)))


def last_truncate(df: DataFrame, kind_column: str, order_by: Sequence[str]) -> Column | None:
    """The position of the last ``-T`` row of ``df`` as a literal (a Spark job), or None
    when it holds none."""
    pos = position(order_by)
    rows = df.where(column(kind_column) == TRUNCATE).agg(_max_position(pos).alias("at")).collect()
    at = rows[0]["at"] if rows else None
    if at is None:
        return None
    return literal(at, df.select(pos).schema.fields[0].dataType)


def truncate_aggregate(kind_column: str, order_by: Sequence[str]) -> Column:
    """For a grouped aggregate: the last ``-T`` position of the group (null: none)."""
    from pyspark.sql import functions as F

    pos = position(order_by)
    return _max_position(F.when(column(kind_column) == TRUNCATE, pos))


def _max_position(pos: Column) -> Column:
    from pyspark.sql import functions as F

    return F.max(pos)


def after(
    df: DataFrame,
    kind_column: str,
    order_by: Sequence[str],
    at: Column | Mapping[str, Column],
    table_column: str | None = None,
) -> DataFrame:
    """``df`` without its ``-T`` rows and without the changes at or before the truncate
    position ``at`` (a literal); with ``table_column``, ``at`` maps each truncated table
    to its own position and other tables keep every change."""
    from pyspark.sql import functions as F

    if isinstance(at, Mapping):
        assert table_column is not None, "positions per table need the table column"
        if not at:
            bound: Column = F.lit(None)
        else:
            cases = None
            for name, value in at.items():
                hit = column(table_column) == F.lit(name)
                cases = F.when(hit, value) if cases is None else cases.when(hit, value)
            assert cases is not None
            bound = cases
    else:
        bound = at
    later = F.coalesce(position(order_by) > bound, F.lit(True))
    return df.where(~column(kind_column).eqNullSafe(F.lit(TRUNCATE)) & later)


def literal(value: Any, data_type: DataType) -> Column:
    """A Spark literal of ``data_type`` holding ``value`` as ``collect()`` returned it
    (structs as Rows, nested)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if isinstance(data_type, StructType):
        if value is None:
            return F.lit(None).cast(data_type)
        return F.struct(*(literal(value[f.name], f.dataType).alias(f.name) for f in data_type))
    return F.lit(value).cast(data_type)


def refuse_in_task(data: pa.Table, kind_column: str | None, where: str) -> None:
    """The ``format("stream_sink")`` route: raise UnsupportedError when a task's rows hold
    a ``-T`` row. Its tasks write their partitions of a micro-batch as they come, so
    none can drop the changes before a truncate that other tasks write."""
    if kind_column is None or kind_column not in data.column_names:
        return
    kinds = data.column(kind_column)
    if not pc.any(pc.equal(kinds.cast(pa.string()), TRUNCATE)).as_py():
        return
    raise UnsupportedError(
        f"{where}: the micro-batch holds a TRUNCATE of the source table (row kind -T, "
        "Debezium op 't'). The format('stream_sink') route writes each partition of a "
        "batch as Spark hands it over, so it cannot drop the batch's changes before the "
        "truncate; write the stream with foreachBatch and IcebergSink or DeltaSink "
        "(sink.foreach_batch), which apply truncates exactly once, or drop truncates in "
        "Debezium (skipped.operations=t) if the table should keep its rows. Nothing of "
        "this batch was committed"
    )
