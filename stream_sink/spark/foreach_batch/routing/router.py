"""``Router``: the routed destination of ``IcebergSink(table_column=...)``, one batch's walk.

Per micro-batch (driver):
1. (first call of a query) open the committer of every table the sink has written
   (:mod:`.committers`, :mod:`.registry`), each restored for that table alone.
2. Find the batch's tables, the columns that carry values for each and the keys, and
   judge every routing value and TRUNCATE (:mod:`.discovery`, :mod:`.dead_letters`,
   :mod:`.truncates`), before anything is created.
3. Open each table, or create it from ``table_template`` (:mod:`.template`; recorded
   as created, and registered before anything is written to it); bring its schema up to
   the batch and plan its write (:mod:`.table_updates`); the dead-letter table, when
   rows go there.
4. ONE Spark job writes every table (:mod:`.writer`).
5. Each table's committer records its result; when a checkpoint is due every table
   with work is checkpointed and committed under its own watermark; the committed
   tables are then offered to their maintenance (:mod:`.maintenance`).

Invariants: the batch is persisted for the discovery aggregate and the write job, and
unpersisted however the batch ends; every check runs before any table is created or
file written; truncates are checked again once the batch's tables exist; once
``write_batch`` returns the batch is recorded in every table it wrote.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from stream_sink.io.fileio import FileIO
from stream_sink.maintenance import MaintenanceOptions
from stream_sink.metrics.committer import CommitterMetricsSnapshot
from stream_sink.metrics.sink import WriterMetrics
from stream_sink.spark import query
from stream_sink.spark.foreach_batch.batch_gaps import BatchGaps
from stream_sink.spark.foreach_batch.routing.committers import RoutedCommits, TableSink
from stream_sink.spark.foreach_batch.routing.dead_letters import (
    Admission,
    dead_letter_columns,
    widen,
)
from stream_sink.spark.foreach_batch.routing.discovery import BatchTables, Discovery
from stream_sink.spark.foreach_batch.routing.maintenance import RoutedMaintenance
from stream_sink.spark.foreach_batch.routing.registry import TableRegistry
from stream_sink.spark.foreach_batch.routing.scope import RouteScope
from stream_sink.spark.foreach_batch.routing.table_updates import plan_table
from stream_sink.spark.foreach_batch.routing.template import TableTemplate
from stream_sink.spark.foreach_batch.routing.truncates import Truncates
from stream_sink.spark.foreach_batch.routing.writer import RoutedWrite
from stream_sink.spark.options import SinkOptions
from stream_sink.spark.plan import BatchPlan
from stream_sink.spark.runtime import left_state
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


class Router:
    """The routed half of IcebergSink, as its :class:`~..destination.Destination`."""

    def __init__(
        self,
        catalog: Catalog,
        options: SinkOptions,
        template: TableTemplate,
        create_tables: bool,
        scope: RouteScope,
        dead_letter_table: str | None = None,
        maintenance: MaintenanceOptions | None = None,
        *,
        writer_metrics: WriterMetrics | None = None,
    ) -> None:
        assert options.table_column is not None
        self.catalog = catalog
        self.options = options
        self.table_column = options.table_column
        self.template = template
        self.dead_letter = dead_letter_table
        self._writer_metrics = writer_metrics or WriterMetrics()
        self.maintenance = (
            None
            if maintenance is None
            else RoutedMaintenance(
                catalog, maintenance, options.sink_id, options.checkpoint_location
            )
        )
        self.registry = TableRegistry(
            catalog, f"{options.checkpoint_location}/{options.sink_id}.tables.json"
        )
        admission = Admission(
            catalog, options.sink_id, self.table_column, scope, create_tables, dead_letter_table
        )
        self.truncates = Truncates(catalog, options, scope, self.registry)
        self.discovery = Discovery(options, admission, self.truncates, self._known)
        self.writes = RoutedWrite(options, self.table_column, dead_letter_table)
        self.commits: RoutedCommits | None = None
        self._opened = False  # by a batch of this run (else close may open it)
        self.gaps = BatchGaps(options.sink_id, "routed tables", options.spark_checkpoint_location)

    # --- the destination ------------------------------------------------------------------

    @property
    def job_id(self) -> str | None:
        """None: a routed sink reports the progress events of every query of the session."""
        return None

    def committer_metrics(self) -> CommitterMetricsSnapshot | None:
        """None: a routed sink's committers are one per table (not one sink's)."""
        return None

    def write_batch(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` of ``df`` into its tables; durable on return."""
        started = time.perf_counter()
        result = self.foreach_batch(df, batch_id)
        self._writer_metrics.flushed(batch_id, result, (time.perf_counter() - started) * 1e3)

    def end_input(self) -> None:
        """Commit what every table holds; opens the tables first when no batch of this
        run did but an earlier run left state (``runtime.left_state``)."""
        opts = self.options
        spark = opts.spark_checkpoint_location
        if (
            self.commits is None
            and not self._opened
            and self.registry.load()
            and left_state(opts.state_dir, spark, self.catalog.io_for(spark))
        ):
            self.open()
        if self.commits is not None:
            self.commits.driver.end_input()

    def end_run_gaps(self) -> None:
        """At a graceful close: batches Spark acknowledged after the last one this run
        handed over (:meth:`BatchGaps.run_ended`)."""
        commits = self.commits
        self.gaps.run_ended(commits.driver if commits else None, self._spark_io())

    def run_ended(self) -> None:
        """The query's run ended (the sink closed): a next run that ends before its first
        batch opens the tables again in ``end_input``."""
        self._opened = False

    def abandon(self) -> None:
        commits, self.commits = self.commits, None
        if commits is not None:
            try:
                commits.close()
            except Exception as e:  # closing must not hide the original error
                log.warning("sink %s: closing operator state failed: %s", self.options.sink_id, e)

    # --- per batch ---------------------------------------------------------------------------

    def foreach_batch(self, df: DataFrame, batch_id: int) -> WriteResult:
        """Write micro-batch ``batch_id`` (see module); the merge of its tables' results."""
        commits = self.open()
        self.gaps.arrived(batch_id, commits.driver, self._spark_io())
        df = df.persist()
        try:
            found = self.discovery.discover(df)
            plans = {
                name: self._prepare_table(commits, name, df.schema, found)
                for name in sorted(found.columns)
            }
            for name in found.truncated:  # again, now that the batch's tables exist
                self.truncates.check(name, self._known(name))
            dead = self._prepare_dead_letter(commits, df.schema) if found.dead else None
            rows = self.truncates.after(df, found.truncated, self.table_column)
            results = self._write(rows, plans, commits, batch_id, dead) if plans or dead else {}
        finally:
            df.unpersist()
        for name in found.truncated:  # emptied when committed, with the changes after it
            results[name] = replace(results.get(name, WriteResult()), truncate=True)
        commits.record(batch_id, results)
        return WriteResult.merge(results.values())

    def _known(self, name: Any) -> bool:
        """Whether the sink has table ``name`` open."""
        return self.commits is not None and name in self.commits.tables

    def _prepare_table(
        self, commits: RoutedCommits, name: str, spark_schema: StructType, found: BatchTables
    ) -> BatchPlan:
        """The table ``name`` (opened, created and registered as needed), its schema
        brought up to the batch when evolution is on, and its write plan."""
        sink = commits.tables.get(name) or self._open_table(commits, name, spark_schema, found)
        columns = found.columns[name]
        return plan_table(name, sink.table, sink.options, self.options, spark_schema, columns)

    def _open_table(
        self, commits: RoutedCommits, name: str, spark_schema: StructType, found: BatchTables
    ) -> TableSink:
        if not self.catalog.table_exists(name) and self.template.create(
            self.catalog,
            name,
            spark_schema,
            found.columns[name],
            found.keys.get(name, ()),
            self.options.sink_id,
        ):
            self.registry.add_created(name)
        self.registry.add(name)
        return commits.open_table(name)

    def _prepare_dead_letter(
        self, commits: RoutedCommits, spark_schema: StructType
    ) -> tuple[str, ...]:
        """The dead-letter table (created with every column of the DataFrame, all optional,
        or given the columns it lacks), registered and open; the columns its rows keep."""
        name = self.dead_letter
        assert name is not None
        arrow = dead_letter_columns(self.catalog, name, spark_schema)
        if name not in commits.tables:
            self.registry.add(name)
            commits.open_table(name)
        return widen(commits.tables[name].table, arrow)

    def _write(
        self,
        df: DataFrame,
        plans: Mapping[str, BatchPlan],
        commits: RoutedCommits,
        batch_id: int,
        dead: tuple[str, ...] | None = None,
    ) -> dict[str, WriteResult]:
        tables = {name: sink.table for name, sink in commits.tables.items()}
        return self.writes.write(df, plans, tables, (commits.job_id, batch_id), dead)

    # --- committers ------------------------------------------------------------------------

    def open(self) -> RoutedCommits:
        """The committers of the current query id (opened and restored on first use)."""
        job_id = query.read_query_id(self.options.spark_checkpoint_location, self._spark_io())
        if self.commits is not None and self.commits.job_id == job_id:
            return self.commits
        self.abandon()
        self.commits = RoutedCommits.open(
            self.catalog,
            self.options,
            job_id,
            self.registry.load(),
            self.maintenance,
            self._committed,
        )
        self._opened = True
        return self.commits

    def _committed(self, committed: Mapping[str, Table]) -> None:
        """After each checkpoint's commits (on the commit's thread when pipelined), to the
        committers still open (see :meth:`.committers.RoutedCommits.committed`)."""
        commits = self.commits
        if commits is not None:
            commits.committed(committed)

    def _spark_io(self) -> FileIO:
        return self.catalog.io_for(self.options.spark_checkpoint_location)
