"""One table behind ``IcebergSink(table=...)``: the single-table destination.

Per micro-batch (driver):
1. (first call of a query) read the query id from ``<spark checkpoint>/metadata``, open
   the operator state and checkpoint storage, ``restore()`` the FilesCommitter with the
   batch ids Spark's commit log already acknowledges (``spark.runtime.open_iceberg``).
2. Check the DataFrame against the table (SchemaMismatchError, MissingColumnError,
   InvalidOptionError) before any file is written; with schema evolution on, bring the
   table's schema up to the DataFrame's first.
3. Distribute (``spark.cdc.distribution``), run TaskWriters on the executors with
   ``mapInArrow`` (or Spark's Parquet writer, :mod:`.parquet_route`), collect the
   serialized WriteResults (file metadata only).
4. The commit driver records the batch durably before returning and, when a checkpoint
   is due, checkpoints and commits it; after each commit the table the commit left is
   offered to in-job maintenance.

Invariants: an error before step 4 commits nothing of the batch (executors abort their
writers; Spark re-runs the batch after a restart); once ``write_batch`` returns the
batch is durable; ``abandon`` closes the runtime (state lock released) and the next
batch restores afresh; in-job maintenance outlives a restore, so a run under way is
never doubled.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from stream_sink.commit.io_context import NOT_ACKNOWLEDGED, in_step
from stream_sink.exceptions import NoSuchTableError, SchemaMismatchError, TruncateInBatchError
from stream_sink.io.fileio import FileIO
from stream_sink.maintenance import MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.lease_lock import sink_lock_location
from stream_sink.metrics.committer import CommitterMetricsSnapshot
from stream_sink.metrics.maintenance_report import report_location, write_report
from stream_sink.metrics.sink import WriterMetrics
from stream_sink.spark.cdc import truncation
from stream_sink.spark.cdc.ordering import TaskSort
from stream_sink.spark.errors import reraise_stream_sink_error
from stream_sink.spark.evolution import evolve_for_batch, with_evolution_hint
from stream_sink.spark.foreach_batch.batch_gaps import BatchGaps
from stream_sink.spark.foreach_batch.parquet_route import (
    Projection,
    choose_route,
    rows_per_file,
    write_batch,
)
from stream_sink.spark.foreach_batch.single_task import runs_in_one_task
from stream_sink.spark.options import SinkOptions
from stream_sink.spark.plan import BatchPlan, plan_batch
from stream_sink.spark.runtime import SinkRuntime, iceberg_job_id, left_state, open_iceberg
from stream_sink.spark.tasks.iceberg import WriteTask, merge_results
from stream_sink.spark.tasks.shared import RESULT_COLUMN, RESULT_DDL
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult
from stream_sink.write.writer_factory import TaskWriterFactory

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


class OneTable:
    """The one table of an ``IcebergSink`` as its :class:`~.destination.Destination`.

    ``write_route`` is checked by the sink; ``writer_metrics`` are the sink's, counted
    here per batch. Raises NoSuchTableError when the table does not exist.
    """

    def __init__(
        self,
        catalog: Catalog,
        options: SinkOptions,
        *,
        write_route: str,
        maintenance: MaintenanceOptions | None,
        writer_metrics: WriterMetrics,
    ) -> None:
        _require_table(catalog, options.table)
        self.catalog = catalog
        self.options = options
        self.write_route = write_route
        self.maintenance_options = maintenance
        self._writer_metrics = writer_metrics
        self._runtime: SinkRuntime[Table] | None = None
        self._opened = False  # by a batch of this run (else close may open it)
        self._maintenance: SinkMaintenance | None = None
        self._plans: dict[str, BatchPlan] = {}
        self._projections: dict[str, Projection] = {}
        self._route = ""
        self._committer_metrics: CommitterMetricsSnapshot | None = None
        self._gaps = BatchGaps(options.sink_id, options.table, options.spark_checkpoint_location)

    @property
    def sink_id(self) -> str:
        return self.options.sink_id

    @property
    def job_id(self) -> str | None:
        return self._runtime.job_id if self._runtime is not None else None

    @property
    def maintenance(self) -> SinkMaintenance | None:
        return self._maintenance

    # --- the destination -----------------------------------------------------------------

    def write_batch(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` of ``df``; durable (exactly once) on return."""
        runtime = self._open()
        self._gaps.arrived(batch_id, runtime.driver, self._spark_io())
        table = runtime.table
        plan = self._plan(df, table)
        started = time.perf_counter()
        step = f"batch {batch_id}: writing its data files"
        with in_step(self.sink_id, table.name, step, NOT_ACKNOWLEDGED):
            result = self._write_changes(df, plan, table, batch_id, runtime.job_id)
        self._writer_metrics.flushed(batch_id, result, (time.perf_counter() - started) * 1e3)
        runtime.record(batch_id, result)

    def end_input(self) -> None:
        """Checkpoint and commit every batch not yet committed, also those an earlier run
        left staged or pending when no batch of this run came."""
        runtime = self._runtime or self._reopen()
        if runtime is not None:
            runtime.driver.end_input()

    def end_run_gaps(self) -> None:
        runtime = self._runtime
        self._gaps.run_ended(runtime.driver if runtime else None, self._spark_io())

    def committer_metrics(self) -> CommitterMetricsSnapshot | None:
        runtime = self._runtime
        return runtime.metrics() if runtime is not None else self._committer_metrics

    def abandon(self) -> None:
        runtime, self._runtime = self._runtime, None
        self._plans.clear()
        self._projections.clear()
        if runtime is not None:
            self._committer_metrics = runtime.metrics()
            try:
                runtime.close()
            except Exception as e:  # closing must not hide the original error
                log.warning("sink %s: closing the operator state failed: %s", self.sink_id, e)

    def run_ended(self) -> None:
        self._opened = False

    # --- steps --------------------------------------------------------------------------------

    def _spark_io(self) -> FileIO:
        return self.catalog.io_for(self.options.spark_checkpoint_location)

    def _reopen(self) -> SinkRuntime[Table] | None:
        """The runtime, restored, when no batch of this run opened it but an earlier run
        left state (see ``runtime.left_state``); None otherwise (also after a failure:
        the next run restores)."""
        spark = self.options.spark_checkpoint_location
        io = self.catalog.io_for(spark)
        if self._opened or not left_state(self.options.sink_state_dir, spark, io):
            return None
        return self._open()

    def _open(self) -> SinkRuntime[Table]:
        """The runtime for the current query id, restoring the committer on first use."""
        job_id = iceberg_job_id(self.catalog, self.options)
        if self._runtime is not None and self._runtime.job_id == job_id:
            return self._runtime
        self.abandon()
        table = self.catalog.load_table(self.options.table)
        runtime = open_iceberg(
            self.catalog, self.options, table, job_id=job_id, after_checkpoint=self._committed
        )
        self._runtime = runtime
        self._opened = True
        self._start_maintenance(runtime.uncommitted_paths)
        return runtime

    def _start_maintenance(self, uncommitted: Callable[[], frozenset[str]]) -> None:
        """In-job maintenance (``stream_sink.maintenance.in_sink``), kept across restores so
        that a run under way is never doubled."""
        options = self.maintenance_options
        if options is None:
            return
        if self._maintenance is None:
            table_name = self.options.table
            root = self.options.checkpoint_location
            where = report_location(root, self.sink_id)
            io = self.catalog.io_for(where)
            self._maintenance = SinkMaintenance(
                lambda: self.catalog.load_table(table_name),
                options,
                f"sink:{self.sink_id}",
                report=lambda metrics: write_report(io, where, metrics),
                lock_location=sink_lock_location(root, self.sink_id),
            )
        self._maintenance.protect(uncommitted)

    def _plan(self, df: DataFrame, table: Table) -> BatchPlan:
        """The batch's plan; with schema evolution on, the table's schema is first brought
        up to the DataFrame's (committed before any file is written, see ``evolution``)."""
        table.refresh()  # another engine may have changed the schema since the last batch
        evolve_for_batch(df.schema, table, self.options)
        meta = table.metadata
        key = f"{meta.current_schema_id}/{meta.default_spec_id}/{df.schema.json()}"
        plan = self._plans.get(key)
        if plan is None:
            try:
                plan = plan_batch(df.schema, table, self.options)
            except SchemaMismatchError as e:
                raise with_evolution_hint(e, self.options) from e
            self._plans[key] = plan
        return plan

    def _write_changes(
        self, df: DataFrame, plan: BatchPlan, table: Table, batch_id: int, job_id: str
    ) -> WriteResult:
        """``_write``; a CDC batch holding a TRUNCATE (row kind ``-T``) is written again
        from after its last one, as a result that empties the table when committed
        (:mod:`stream_sink.spark.cdc.truncation`)."""
        kind = self.options.row_kind_column
        if not (self.options.is_cdc and kind):
            return self._write(df, plan, table, batch_id, job_id)
        try:
            return self._write(truncation.flagged(df, kind), plan, table, batch_id, job_id)
        except TruncateInBatchError:
            at = truncation.last_truncate(df, kind, self.options.order_by)
            if at is None:  # pragma: no cover (the marker fires only on a -T row)
                raise
        log.info("sink %s: batch %d truncates table %s", self.sink_id, batch_id, table.name)
        rest = truncation.after(df, kind, self.options.order_by, at)
        return replace(self._write(rest, plan, table, batch_id, job_id), truncate=True)

    def _write(
        self, df: DataFrame, plan: BatchPlan, table: Table, batch_id: int, job_id: str
    ) -> WriteResult:
        """The batch's data files. Executors get the table's current storage credentials;
        when the store refuses them as expired mid-write (vended credentials outlived by a
        long batch), the credentials are renewed and the batch written once more, under new
        file names. Only the WriteResult of the attempt that succeeded is committed; the
        files the failed attempt left are referenced by nothing (orphan cleanup removes
        them)."""
        used = table.io.current_properties  # what the executors get (renewed if due)
        try:
            return self._write_files(df, plan, table, batch_id, job_id)
        except Exception as e:
            credentials = table.io.credentials
            if credentials is None or not credentials.refresh_after(e, used):
                raise
        log.warning(
            "sink %s: batch %d: the store refused the executors' storage credentials as "
            "expired; renewed them, writing the batch's data files again",
            self.sink_id,
            batch_id,
        )
        return self._write_files(df, plan, table, batch_id, job_id)

    def _write_files(
        self, df: DataFrame, plan: BatchPlan, table: Table, batch_id: int, job_id: str
    ) -> WriteResult:
        factory = TaskWriterFactory.for_table(
            table,
            equality_fields=plan.equality_fields,
            upsert=self.options.mode == "upsert",
            operation_id=f"{job_id[:8]}-{batch_id}-{uuid.uuid4().hex[:8]}",
            cdc_options=plan.cdc_options,
        )
        route, why = choose_route(self.write_route, self.options.mode, factory)
        if route != self._route:
            overruled = self.write_route == "spark" and route != "spark"
            log.log(
                logging.WARNING if overruled else logging.INFO,
                "sink %s: data files written by the %s route (%s)",
                self.sink_id,
                route,
                why,
            )
            self._route = route
        if route == "spark":
            projection = self._projection(factory, plan, table)
            head = table.current_snapshot()
            target = factory.config.target_file_bytes
            per_file = rows_per_file(head.summary, target) if head else None
            prepared = plan.prepare(df, batch_id)
            return write_batch(prepared, factory, table.name, projection, per_file)
        ties = df.sparkSession.sparkContext.accumulator(0) if plan.tie_columns else None
        task = WriteTask(
            factory, plan.insert_kind_column, plan.tie_columns, plan.drop_columns, ties
        )
        job = self._one_task_job(df, plan, task, batch_id)
        if job is None:
            job = plan.prepare(df, batch_id).mapInArrow(task, RESULT_DDL)
        try:
            rows = job.collect()
        except Exception as e:
            reraise_stream_sink_error(e)
            raise
        if ties is not None and ties.value:
            self._writer_metrics.ties(int(ties.value))
        return merge_results([bytes(r[RESULT_COLUMN]) for r in rows])

    def _one_task_job(
        self, df: DataFrame, plan: BatchPlan, task: WriteTask, batch_id: int
    ) -> DataFrame | None:
        """A CDC batch Spark reads in one small partition: the write job without shuffle,
        its task checking and ordering the rows (see ``single_task``); None otherwise."""
        if not plan.options.is_cdc:
            return None
        sort = TaskSort(plan.equality_fields, plan.options.order_by, f"batch {batch_id}")
        local = replace(task, drop_columns=plan.one_task_drop_columns, sort=sort)
        job = plan.prepare_one_task(df).mapInArrow(local, RESULT_DDL)
        return job if runs_in_one_task(job) else None

    def _projection(self, factory: TaskWriterFactory, plan: BatchPlan, table: Table) -> Projection:
        """The Spark route's columns for this schema, spec and data columns (built once)."""
        meta = table.metadata
        key = f"{meta.current_schema_id}/{meta.default_spec_id}/{plan.columns}"
        projection = self._projections.get(key)
        if projection is None:
            projection = Projection.build(factory, plan.columns, table.name)
            self._projections[key] = projection
        return projection

    def _committed(self, committed: Mapping[str, Table]) -> None:
        """After each checkpoint's commit (on the commit's thread when pipelined): offer
        the metadata the commit left to in-job maintenance."""
        if self._maintenance is not None:
            for table in committed.values():
                self._maintenance.after_commit(table.metadata)


def _require_table(catalog: Catalog, table: str) -> None:
    """NoSuchTableError, where the sink is made, when its one table does not exist
    (otherwise the query would fail only at its first micro-batch)."""
    if catalog.table_exists(table):
        return
    raise NoSuchTableError(
        f"table {table} does not exist in catalog {catalog.name!r}: the sink writes an "
        f"existing table. Create it first (catalog.create_table({table!r}, schema=...), "
        "or Java/Spark SQL CREATE TABLE), check the name and the catalog's "
        "warehouse/uri, or route rows to tables created on demand with "
        "table_column=..., namespaces=[...] and create_tables=True"
    )
