"""Rows a routed sink may not write where they point, and the dead-letter table.

A routing value is refused when it is null, names no table a catalog should take or
one outside the sink's scope (:mod:`.scope`), or names a missing table while
the sink does not create tables. Refused rows stop the query (ValidationError saying
why and how to keep them aside) unless ``dead_letter_table`` is given: they then go
there, every column of the batch kept.

Invariants: every value is judged before anything is created or written; the
dead-letter table is created with every column of the DataFrame, all optional, and
given the columns a later batch brings (never one taken away), so no refused row
loses a value; it is append only, committed exactly once as any routed table.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from stream_sink.exceptions import AlreadyExistsError
from stream_sink.spark import schema_check
from stream_sink.spark.foreach_batch.routing.scope import RouteScope
from stream_sink.spark.foreach_batch.routing.template import ensure_namespace
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.catalog.metadata_files import STREAMING_METADATA_PROPERTIES
from stream_sink.table.table import Table

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

_HINT = "; or pass dead_letter_table= to keep such rows aside"


@dataclass(frozen=True)
class Admission:
    """Whether the rows a routing value names may be written (see module)."""

    catalog: Catalog
    sink_id: str
    table_column: str
    scope: RouteScope
    create_tables: bool
    dead_letter: str | None

    def where(self, name: Any) -> str:
        return f"sink {self.sink_id}: routing value {name!r} in column {self.table_column!r}"

    def outside_problem(self, name: Any) -> str | None:
        """Why rows routed by ``name`` may not be written wherever the table stands (a
        null, a name no catalog should take, a table outside the sink's scope)."""
        if name is None:
            return f"{self.where(name)} is not a table name such as 'db.table'{_HINT}"
        problem = self.scope.problem(str(name))
        return None if problem is None else f"{self.where(name)} {problem}{_HINT}"

    def missing_problem(self, name: str, known: bool) -> str | None:
        """Why rows routed by ``name`` cannot be written: the table is missing and the
        sink does not create tables (None: they can). ``known``: the sink has it open."""
        if not known and not self.create_tables and not self.catalog.table_exists(name):
            return (
                f"{self.where(name)} names no table of catalog {self.catalog.name!r}; "
                f"create it, or pass create_tables=True{_HINT}"
            )
        return None


def dead_letter_columns(catalog: Catalog, name: str, spark_schema: StructType) -> pa.Schema:
    """The columns dead-letter table ``name`` keeps for ``spark_schema`` (all optional);
    the table is created with them when it does not exist."""
    from stream_sink.table.arrow import schema_from_arrow

    data = schema_check.spark_to_arrow(spark_schema, name)
    arrow = pa.schema([f.with_nullable(True) for f in data])
    if not catalog.table_exists(name):
        ensure_namespace(catalog, name)
        with contextlib.suppress(AlreadyExistsError):
            catalog.create_table(
                name, schema_from_arrow(arrow), properties=STREAMING_METADATA_PROPERTIES
            )
    return arrow


def widen(table: Table, arrow: pa.Schema) -> tuple[str, ...]:
    """Give the dead-letter ``table`` the columns of ``arrow`` it lacks; the columns its
    rows keep."""
    table.refresh()
    with table.update_schema() as update:
        update.union_by_name(arrow)
    return tuple(arrow.names)
