"""Checks and ordering rules a CDC micro-batch gets before it is distributed.

- A null in an equality (key) field or in an order column stops the batch before
  anything is written, naming the batch and the input row (its values as JSON, cut to
  200 characters), not a position inside some task. A change without a source position
  cannot be placed among the other changes of its key, so a null order value (or a
  null field of a struct order column) is refused rather than sorted first silently.
- Ties: several changes of one key with the same order value in one batch are applied
  in input order, the last one winning: a sequence number taken where the batch is read
  (before any shuffle) breaks the tie, so the rule holds whatever Spark's sort does
  with equal keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from stream_sink.spark.cdc.distribution import column
from stream_sink.spark.errors import spark_error_message

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

INPUT_SEQUENCE = "_stream_sink_input_seq"
SHOWN_CHARS = 200
"""Characters of an input row shown in a null key or order value message."""


ORDER_HINT = (
    "; every change needs its source position (LSN, offset, sequence) to be "
    "ordered against the other changes of its key"
)


def guarded(
    df: DataFrame, keys: Sequence[str], order_by: Sequence[str], batch_id: int | None
) -> DataFrame:
    """``df`` with its key and order columns checked for nulls and the input sequence
    (:data:`INPUT_SEQUENCE`) added; the check runs as the rows are read."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    batch = f"batch {batch_id}" if batch_id is not None else "the batch"
    row = F.substring(F.to_json(F.struct(*(column(c) for c in df.columns))), 1, SHOWN_CHARS)
    checked: dict[str, Column] = {}
    for k in keys:
        text = f"{batch}: equality field {k!r} is null in input row "
        checked[k] = _not_null(column(k), column(k), "NullKeyError", text, row)
    for o in order_by:
        col = column(o)
        t = df.schema[o].dataType
        parts = [(o, col)]
        if isinstance(t, StructType):
            parts = [(f"{o}.{f.name}", col.getField(f.name)) for f in t.fields]
        for name, part in parts:
            text = f"{batch}: order column {name!r} is null in input row "
            col = _not_null(col, part, "ValidationError", text, row, ORDER_HINT)
        checked[o] = col
    out = df.select(*(checked.get(c, column(c)).alias(c) for c in df.columns))
    return out.withColumn(INPUT_SEQUENCE, F.monotonically_increasing_id())


def _not_null(
    value: Column, tested: Column, error: str, text: str, row: Column, suffix: str = ""
) -> Column:
    """``value``, or a Spark error (turned back into ``error`` on the driver) where
    ``tested`` is null."""
    from pyspark.sql import functions as F

    message = F.concat(F.lit(spark_error_message(error, text)), row, F.lit(suffix))
    return F.when(tested.isNull(), F.raise_error(message)).otherwise(value)
