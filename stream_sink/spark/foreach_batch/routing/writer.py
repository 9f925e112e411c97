"""The one Spark job that writes every table of a routed batch.

Driver: one TaskWriterFactory per table (the batch's plan for it; one operation id for
the batch), the rows hashed by (table, keys) and sorted by (table, keys, order) in CDC
modes; executors (:class:`RoutedWriteTask`): each task routes its rows to one
TaskWriter per table it sees and returns one (table, WriteResult) row per table.

Invariants: a task that fails aborts every writer it opened (no file of it is
referenced); a row whose value is null or names no table of the batch goes to the
dead-letter table when the batch has one, and is otherwise never written (the driver
refused such values before the job); each table's row keeps only the columns its plan
writes; in CDC modes a row is hashed and sorted by its own table's key columns only
(:func:`key_owners`): a column that keys another table (``lines.sku`` beside
``stock``'s key ``sku``) may change between two changes of one key, as a Debezium
delete's before image (its key columns only, the rest zero) does, and must not split
them over tasks or reorder them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.spark.cdc import distribution
from stream_sink.spark.errors import reraise_stream_sink_error
from stream_sink.spark.options import SinkOptions
from stream_sink.spark.plan import BatchPlan
from stream_sink.spark.tasks.iceberg import with_insert_kind
from stream_sink.spark.tasks.shared import current_task_ids
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult
from stream_sink.write.task_writers import TaskWriter
from stream_sink.write.writer_factory import TaskWriterFactory

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ROUTED_DDL = "table string, result binary"
_ROUTED_SCHEMA = pa.schema([pa.field("table", pa.string()), pa.field("result", pa.binary())])


@dataclass(frozen=True)
class RoutedWriteTask:
    """``mapInArrow`` function: rows to one TaskWriter per table; one (table, result) row
    per table the task saw. Rows whose value is null or names no table of ``factories``
    go to ``dead_letter`` (all their columns) when set."""

    table_column: str
    factories: Mapping[str, TaskWriterFactory]
    columns: Mapping[str, tuple[str, ...]]
    insert_kind_column: str | None = None
    insert_kind_tables: frozenset[str] = frozenset()
    dead_letter: str | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ids = current_task_ids()
        writers: dict[str, TaskWriter] = {}
        try:
            for batch in batches:
                for value, part in _split(batch, self.table_column):
                    name = (
                        value
                        if value in self.factories and value != self.dead_letter
                        else (self.dead_letter)
                    )
                    if name is None:
                        continue  # the driver refused such values before writing
                    writer = writers.get(name)
                    if writer is None:
                        writer = self.factories[name].create(
                            ids.partition_id, ids.task_id, ids.attempt_id
                        )
                        writers[name] = writer
                    rows = part.select(list(self.columns[name]))
                    if self.insert_kind_column is not None and name in self.insert_kind_tables:
                        rows = next(with_insert_kind(iter([rows]), self.insert_kind_column))
                    writer.write(rows)
            results = [(name, w.complete().to_bytes()) for name, w in writers.items()]
        except BaseException:
            for w in writers.values():
                w.abort()
            raise
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([n for n, _ in results], pa.string()),
                pa.array([r for _, r in results], pa.binary()),
            ],
            schema=_ROUTED_SCHEMA,
        )


def _split(batch: pa.RecordBatch, column: str) -> Iterator[tuple[str | None, pa.RecordBatch]]:
    values = batch.column(batch.schema.get_field_index(column))
    for name in pc.unique(values).to_pylist():
        mask = pc.is_null(values) if name is None else pc.equal(values, name)
        yield name, batch.filter(pc.fill_null(mask, False))


def key_owners(plans: Mapping[str, BatchPlan]) -> dict[str, tuple[str, ...] | None]:
    """Each key column of the batch's tables (sorted by name), with the tables it keys;
    None when it keys every table of the batch (its values need no mask)."""
    owners: dict[str, list[str]] = {}
    for name in sorted(plans):
        for key in plans[name].equality_fields:
            owners.setdefault(key, []).append(name)
    return {
        key: None if len(tables) == len(plans) else tuple(tables)
        for key, tables in sorted(owners.items())
    }


def routed_keys(table_column: str, plans: Mapping[str, BatchPlan]) -> list[str | Column]:
    """What a routed CDC batch is hashed and sorted by: the routing column, then each
    key column, null on the rows of tables it does not key (see :func:`key_owners`)."""
    from pyspark.sql import functions as F

    routing = distribution.column(table_column)
    keys: list[str | Column] = [table_column]
    for key, tables in key_owners(plans).items():
        keys.append(
            key if tables is None else F.when(routing.isin(*tables), distribution.column(key))
        )
    return keys


@dataclass(frozen=True)
class RoutedWrite:
    """Writes a routed batch's tables in one Spark job (see module)."""

    options: SinkOptions
    table_column: str
    dead_letter: str | None

    def write(
        self,
        df: DataFrame,
        plans: Mapping[str, BatchPlan],
        tables: Mapping[str, Table],
        operation: tuple[str, int],
        dead: tuple[str, ...] | None = None,
    ) -> dict[str, WriteResult]:
        """Each table's WriteResult of batch ``operation`` (query id, batch id) of
        ``df``; ``dead``: the dead-letter table's columns, when the batch has such rows."""
        task = self._task(plans, tables, operation, dead)
        spread = df
        if self.options.is_cdc:
            spread = distribution.distribute_cdc(
                df, routed_keys(self.table_column, plans), self.options.order_by
            )
        try:
            rows = spread.mapInArrow(task, ROUTED_DDL).collect()
        except Exception as e:
            reraise_stream_sink_error(e)
            raise
        parts: dict[str, list[WriteResult]] = {}
        for r in rows:
            parts.setdefault(r["table"], []).append(WriteResult.from_bytes(bytes(r["result"])))
        return {name: WriteResult.merge(rs) for name, rs in parts.items()}

    def _task(
        self,
        plans: Mapping[str, BatchPlan],
        tables: Mapping[str, Table],
        operation: tuple[str, int],
        dead: tuple[str, ...] | None,
    ) -> RoutedWriteTask:
        job_id, batch_id = operation
        op = f"{job_id[:8]}-{batch_id}-{uuid.uuid4().hex[:8]}"
        factories = {
            name: TaskWriterFactory.for_table(
                tables[name],
                equality_fields=p.equality_fields,
                upsert=self.options.mode == "upsert",
                operation_id=op,
                cdc_options=p.cdc_options,
            )
            for name, p in plans.items()
        }
        insert_kind = next(iter(plans.values())).insert_kind_column if plans else None
        columns = {
            name: tuple(c for c in p.columns if c != insert_kind) for name, p in plans.items()
        }
        if dead is not None and self.dead_letter is not None:
            factories[self.dead_letter] = TaskWriterFactory.for_table(
                tables[self.dead_letter], operation_id=op
            )
            columns[self.dead_letter] = dead
        return RoutedWriteTask(
            self.table_column,
            factories,
            columns,
            insert_kind,
            frozenset(plans),
            self.dead_letter if dead else None,
        )
