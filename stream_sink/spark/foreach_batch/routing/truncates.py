"""TRUNCATE rows (row kind ``-T``) of a routed CDC batch: which tables they empty.

A truncate empties only the table its rows name, and only one the sink owns (one it
created, or one given in ``tables=``; :mod:`.scope`); the rows before a table's
last truncate in the batch are dropped for that table, the rows after it are written,
and the table's result is committed as one that empties the table first
(:mod:`stream_sink.spark.cdc.truncation`).

Invariants: a truncate of a table the sink does not own stops the query before
anything is written; one of a table that does not exist yet is checked again once the
batch created it (another writer may have created it first); a truncate alone of a
table neither the sink nor the catalog has empties nothing and creates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stream_sink.exceptions import ValidationError
from stream_sink.spark.cdc import truncation
from stream_sink.spark.foreach_batch.routing.registry import TableRegistry
from stream_sink.spark.foreach_batch.routing.scope import RouteScope
from stream_sink.spark.options import SinkOptions
from stream_sink.table.catalog.base import Catalog

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


@dataclass(frozen=True)
class Truncates:
    """The truncate rules of one routed sink (see module)."""

    catalog: Catalog
    options: SinkOptions
    scope: RouteScope
    registry: TableRegistry

    def kind(self, df: DataFrame) -> str | None:
        """The row kind column when the batch may hold TRUNCATE rows (CDC modes)."""
        kind = self.options.row_kind_column
        return kind if self.options.is_cdc and kind and kind in df.columns else None

    def aggregates(self, kind: str) -> list[Column]:
        """The discovery aggregate's columns for truncates: ``trunc``, the position of a
        table's last truncate (null: none), and ``changes``, its rows that are not."""
        from pyspark.sql import functions as F

        changes = ~F.col(kind).eqNullSafe(F.lit(truncation.TRUNCATE))
        return [
            truncation.truncate_aggregate(kind, self.options.order_by).alias("trunc"),
            F.count(F.when(changes, F.lit(1))).alias("changes"),
        ]

    def skips(self, name: Any, known: bool) -> bool:
        """A table the sink has not written (``known``: it has) and the catalog lacks: a
        truncate of it alone has nothing to empty, and nothing to create the table from."""
        return not known and not self.catalog.table_exists(str(name))

    def check(self, name: str, known: bool) -> None:
        """Refuse a TRUNCATE of a table the sink does not own; a table that does not
        exist yet is one this batch creates (``known``: the sink has it open)."""
        created = name in self.registry.created() or (
            not known and not self.catalog.table_exists(name)
        )
        refusal = self.scope.truncate_refusal(name, created)
        if refusal is not None:
            raise ValidationError(f"sink {self.options.sink_id}: {refusal}")

    def after(self, df: DataFrame, truncated: Mapping[str, Any], table_column: str) -> DataFrame:
        """The rows to write: without TRUNCATE rows, and for each truncated table only the
        changes after its last truncate."""
        kind = self.kind(df)
        if kind is None:
            return df
        order_by = self.options.order_by
        pos_type = df.select(truncation.position(order_by)).schema[0].dataType
        at = {n: truncation.literal(v, pos_type) for n, v in truncated.items()}
        return truncation.after(df, kind, order_by, at, table_column)
