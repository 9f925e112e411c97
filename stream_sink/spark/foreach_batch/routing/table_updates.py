"""Each routed table brought up to what a batch carries for it, and its write plan.

With schema evolution on (``schema_evolution=``, :mod:`stream_sink.spark.evolution`)
a table's schema first gains the columns that carry values for it; the batch is then
planned against the table as it stands (:func:`stream_sink.spark.plan.plan_batch`),
with only the columns the table has (and the CDC columns the plan reads).

Invariants: a column that carries values for a table that does not have it stops the
query (SchemaMismatchError naming table and column) unless evolution added it: nothing
is silently dropped; an order column the table lacks is read, not written, as for one
table; the table is refreshed first (another engine may have changed it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stream_sink.exceptions import SchemaMismatchError
from stream_sink.spark.evolution import HINT_NONE, evolve_for_batch
from stream_sink.spark.options import SinkOptions
from stream_sink.spark.plan import BatchPlan, plan_batch
from stream_sink.table.table import Table

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def plan_table(
    name: str,
    table: Table,
    options: SinkOptions,
    sink: SinkOptions,
    spark_schema: StructType,
    columns: frozenset[str],
) -> BatchPlan:
    """The write plan of table ``name`` (``table``, with its own ``options``) for a batch
    of ``spark_schema`` whose ``columns`` carry values for it, its schema evolved first;
    ``sink``: the routed sink's options."""
    table.refresh()
    cdc = cdc_columns(sink, spark_schema)
    evolve_for_batch(sub_schema(spark_schema, columns | cdc), table, options)
    optional = set(sink.order_by)
    missing = sorted(c for c in columns - optional if not table.schema().has_field(c))
    if missing:
        raise SchemaMismatchError(
            f"sink {sink.sink_id}: rows for table {name} carry values in columns "
            f"{missing} that the table does not have{HINT_NONE}"
        )
    present = {c for c in spark_schema.fieldNames() if table.schema().has_field(c)}
    return plan_batch(sub_schema(spark_schema, present | cdc), table, options)


def cdc_columns(options: SinkOptions, schema: StructType) -> set[str]:
    """The row kind and order columns of ``schema`` a CDC plan reads."""
    named = {c for c in (options.row_kind_column, *options.order_by) if c}
    return named & set(schema.fieldNames())


def sub_schema(schema: StructType, names: set[str] | frozenset[str]) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name in names])
