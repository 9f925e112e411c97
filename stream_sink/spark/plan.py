"""The per-query plan of the sink: checks done once per DataFrame schema, and how each
micro-batch is shaped (columns, distribution) before it reaches the writers.

Invariants:
- ``plan_batch`` raises before anything is written when the DataFrame cannot go into
  the table (schema, missing row kind / order / key columns, a partitioned upsert
  table whose partition columns are not all equality fields, no equality fields).
- ``prepare`` keeps exactly the table's columns present in the data, plus the row kind
  column in CDC modes; order columns that are not table columns are dropped only after
  the sort has used them. When the data already has exactly those columns in that
  order, no projection is added (distribution never reorders columns).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stream_sink.spark import schema_check
from stream_sink.spark.cdc import distribution
from stream_sink.spark.cdc import guard as cdc_guard
from stream_sink.spark.cdc.control_columns import control_columns
from stream_sink.spark.options import SinkOptions
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.schema import Schema
from stream_sink.table.sorting import SortOrder
from stream_sink.write.cdc_writers import ROW_KIND_COLUMN_OPTION
from stream_sink.write.change_plan import DEFAULT_ROW_KIND_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from stream_sink.table.table import Table


@dataclass(frozen=True)
class BatchPlan:
    options: SinkOptions
    schema: Schema
    spec: PartitionSpec
    sort_order: SortOrder
    columns: tuple[str, ...]
    equality_fields: tuple[str, ...] = ()
    cdc_options: Mapping[str, Any] = field(default_factory=dict)
    data_columns: tuple[str, ...] = ()
    """The DataFrame's columns, in order, as planned (empty: unknown)."""

    @property
    def insert_kind_column(self) -> str | None:
        """The row kind column the executors add (upsert without a row kind column)."""
        if self.options.mode == "upsert" and not self.options.row_kind_column:
            return DEFAULT_ROW_KIND_COLUMN
        return None

    def prepare(self, df: DataFrame, batch_id: int | None = None) -> DataFrame:
        """``df`` distributed for the writers and cut to the columns they take (CDC
        batches checked and tie-broken first, see :mod:`.cdc.guard`)."""
        opts = self.options
        if opts.is_cdc:
            df = cdc_guard.guarded(df, self.equality_fields, opts.order_by, batch_id)
            clustering = (
                distribution.key_clustering(self.spec, self.schema, self.equality_fields)
                if opts.distribution == "hash"
                else []
            )
            spread = distribution.distribute_cdc(
                df,
                self.equality_fields,
                (*opts.order_by, cdc_guard.INPUT_SEQUENCE),
                by_range=opts.distribution == "range",
                clustering=clustering,
            )
        else:
            spread = distribution.distribute_append(
                df, opts.distribution, self.spec, self.schema, self.sort_order
            )
        if self.columns == self.data_columns and not opts.is_cdc:
            return spread
        return spread.select(*(distribution.column(c) for c in (*self.columns, *self.drop_columns)))

    def prepare_one_task(self, df: DataFrame) -> DataFrame:
        """CDC: ``df`` cut to the columns the task takes, as read (no guard, shuffle or
        sort: for a batch read in one task, which checks and orders it itself)."""
        extra = [c for c in self.options.order_by if c not in self.columns]
        return df.select(*(distribution.column(c) for c in (*self.columns, *extra)))

    @property
    def one_task_drop_columns(self) -> tuple[str, ...]:
        """CDC read in one task: order columns that are not written (no input sequence)."""
        return tuple(c for c in self.options.order_by if c not in self.columns)

    @property
    def tie_columns(self) -> tuple[str, ...]:
        """CDC: the columns whose equal values make two changes a tie (key, order)."""
        return (*self.equality_fields, *self.options.order_by) if self.options.is_cdc else ()

    @property
    def drop_columns(self) -> tuple[str, ...]:
        """CDC: columns the tasks get only to count ties (order columns that are not
        written, and the input sequence); the tasks drop them before writing."""
        if not self.options.is_cdc:
            return ()
        extra = [c for c in self.options.order_by if c not in self.columns]
        return (*extra, cdc_guard.INPUT_SEQUENCE)


def plan_batch(spark_schema: StructType, table: Table, options: SinkOptions) -> BatchPlan:
    """Check a DataFrame schema against ``table`` and plan its writes (see module doc)."""
    where = table.name
    schema, spec = table.schema(), table.spec()
    data = schema_check.spark_to_arrow(spark_schema, where)
    control = control_columns(
        spark_schema, row_kind_column=options.row_kind_column, table_column=options.table_column
    )
    extra = (
        *schema_check.non_table_columns(options, schema),
        *sorted(c for c in control if not schema.has_field(c)),
    )
    schema_check.check_data_schema(data, schema, ignore=extra, where=where)
    written = [n for n in data.names if n not in extra]
    names = tuple(data.names)
    if not options.is_cdc:
        return BatchPlan(
            options, schema, spec, table.sort_order(), tuple(written), data_columns=names
        )
    keys = schema_check.resolve_equality_fields(options, schema, where)
    schema_check.check_cdc_columns(data, options, keys, where)
    if options.mode == "upsert":
        schema_check.check_upsert_partitioning(spec, schema, keys, where)
    if options.row_kind_column:
        written.append(options.row_kind_column)
    delta = {ROW_KIND_COLUMN_OPTION: options.row_kind_column or DEFAULT_ROW_KIND_COLUMN}
    return BatchPlan(
        options, schema, spec, table.sort_order(), tuple(written), keys, delta, data_columns=names
    )
