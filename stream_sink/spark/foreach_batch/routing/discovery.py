"""What a routed batch holds, found by one aggregate over it before anything is written.

Grouped by routing value, the aggregate counts each data column's values (the columns
that carry values for a table), takes the Debezium key fields
(``from_debezium(key_column=...)``) and, in CDC modes, the position of each table's
last TRUNCATE (:mod:`.truncates`). Each value is then judged (:mod:`.dead_letters`):
its rows go to their table, to the dead-letter table, or stop the query.

Invariants: one Spark job over the (persisted) batch; every value is judged, and every
truncate checked, before any table is created or any file written; a value whose rows
are only truncates of a table that does not exist is skipped, and one refused with
only truncates keeps nothing aside (its TRUNCATE is not applied, logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stream_sink.exceptions import SchemaMismatchError, ValidationError
from stream_sink.spark.cdc import distribution
from stream_sink.spark.cdc.control_columns import KEY_FIELDS_COLUMN, data_columns
from stream_sink.spark.foreach_batch.routing.dead_letters import Admission
from stream_sink.spark.foreach_batch.routing.truncates import Truncates
from stream_sink.spark.options import SinkOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchTables:
    """What the discovery aggregate found: per table, its columns with values and key."""

    columns: Mapping[str, frozenset[str]]
    keys: Mapping[str, tuple[str, ...]]
    dead: tuple[Any, ...] = ()
    """Routing values whose rows go to the dead-letter table."""
    truncated: Mapping[str, Any] = field(default_factory=dict)
    """Tables the batch truncates: the position (as collected) of the last truncate."""


@dataclass(frozen=True)
class Discovery:
    """Finds a routed batch's tables (see module); ``known`` tells a table the sink has
    open."""

    options: SinkOptions
    admission: Admission
    truncates: Truncates
    known: Callable[[Any], bool]

    @property
    def table_column(self) -> str:
        return self.admission.table_column

    def data_columns(self, schema: StructType) -> tuple[str, ...]:
        """The user's columns: all but the routing, row kind and ``from_debezium``'s
        columns (:mod:`stream_sink.spark.cdc.control_columns`); order columns are data."""
        return data_columns(
            schema, row_kind_column=self.options.row_kind_column, table_column=self.table_column
        )

    def discover(self, df: DataFrame) -> BatchTables:
        """The batch's tables, dead-letter values and truncates (one Spark job)."""
        col = self.table_column
        if col not in df.columns:
            raise SchemaMismatchError(
                f"sink {self.options.sink_id}: the routing column {col!r} is missing from the "
                f"DataFrame (columns: {df.columns})"
            )
        data = list(self.data_columns(df.schema))
        kind = self.truncates.kind(df)
        found = _Found()
        for row in self._aggregate(df, data, kind):
            self._take(row, data, kind, found)
        return BatchTables(found.columns, found.keys, tuple(found.dead), found.truncated)

    def _aggregate(self, df: DataFrame, data: list[str], kind: str | None) -> list[Row]:
        from pyspark.sql import functions as F

        aggs = [F.count(distribution.column(c)).alias(f"n{i}") for i, c in enumerate(data)]
        if KEY_FIELDS_COLUMN in df.columns:
            aggs.append(F.first(F.col(KEY_FIELDS_COLUMN), ignorenulls=True).alias("key"))
        if kind is not None:
            aggs.extend(self.truncates.aggregates(kind))
        grouped = df.groupBy(distribution.column(self.table_column).alias("t"))
        return grouped.agg(*aggs).collect()

    def _take(self, row: Row, data: list[str], kind: str | None, found: _Found) -> None:
        """Judge one routing value's row of the aggregate into ``found``."""
        name = row["t"]
        at = row["trunc"] if kind is not None else None
        only_truncates = at is not None and not row["changes"]
        known = self.known(name)
        outside = self.admission.outside_problem(name)
        if outside is None and only_truncates and self.truncates.skips(name, known):
            return  # only truncates, of no table there is: nothing to empty
        problem = outside or self.admission.missing_problem(name, known)
        if problem is not None:
            if self.admission.dead_letter is None:
                raise ValidationError(problem)
            if only_truncates:  # nothing to keep aside: the truncate is not applied
                log.warning("%s; its TRUNCATE is not applied", problem)
            else:
                found.dead.append(name)
            return
        if at is not None:
            self.truncates.check(name, known)
        found.columns[name] = frozenset(c for i, c in enumerate(data) if row[f"n{i}"])
        if "key" in row.asDict() and row["key"]:
            found.keys[name] = tuple(row["key"])
        if at is not None:
            found.truncated[name] = at


@dataclass
class _Found:
    columns: dict[str, frozenset[str]] = field(default_factory=dict)
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    dead: list[Any] = field(default_factory=list)
    truncated: dict[str, Any] = field(default_factory=dict)
