"""``IcebergSink``: a Spark ``foreachBatch`` function that writes Iceberg exactly once.

Per micro-batch (driver):
1. (first call) read the query id from ``<spark checkpoint>/metadata``, open the
   operator state and checkpoint storage, ``restore()`` the FilesCommitter with the
   batch ids Spark's commit log already acknowledges.
2. Check the DataFrame against the table (SchemaMismatchError, MissingColumnError,
   InvalidOptionError) before any file is written.
3. Distribute (``distribution.py``), run TaskWriters on the executors with
   ``mapInArrow``, collect the serialized WriteResults (file metadata only).
4. The commit driver (:class:`~stream_sink.commit.driver.CommitDriver`) records the
   batch durably before returning and, when a checkpoint is due, checkpoints and
   commits it (the protocol's steps are all there).

Invariants:
- An error before step 4 commits nothing of the batch: executors abort their writers,
  the error stops the query, and Spark re-runs the batch after a restart.
- Once ``foreach_batch`` returns, the batch is in durable state (or in the table), so
  Spark may acknowledge it in its commit log.
- Any error closes the runtime (state lock released); the next call restores afresh.

Metrics: ``metrics_snapshot()`` (writers' and committer's, see ``stream_sink.metrics.sink``);
every sink is exported by ``stream_sink.metrics.prometheus`` (served on ``metrics_port``
when given), and ``progress_listener()`` reports them on each Spark progress event.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from stream_sink.commit.io_context import NOT_ACKNOWLEDGED, in_step
from stream_sink.exceptions import (
    InvalidOptionError,
    NoSuchTableError,
    SchemaMismatchError,
    TruncateInBatchError,
)
from stream_sink.io.fileio import FileIO
from stream_sink.maintenance import MaintenanceMetricsSnapshot, MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.lease_lock import sink_lock_location
from stream_sink.metrics.committer import CommitterMetricsSnapshot
from stream_sink.metrics.maintenance_report import report_location, write_report
from stream_sink.metrics.prometheus import REGISTRY, MetricsServer, serve
from stream_sink.metrics.sink import SinkMetricsSnapshot, WriterMetrics
from stream_sink.spark.cdc import truncation
from stream_sink.spark.cdc.ordering import TaskSort
from stream_sink.spark.errors import raise_if_interrupted, reraise_stream_sink_error
from stream_sink.spark.evolution import evolve_for_batch, with_evolution_hint
from stream_sink.spark.foreach_batch.batch_gaps import BatchGaps
from stream_sink.spark.foreach_batch.parquet_route import (
    ROUTES,
    Projection,
    choose_route,
    rows_per_file,
    write_batch,
)
from stream_sink.spark.foreach_batch.route_scope import RouteScope
from stream_sink.spark.foreach_batch.routed_maintenance import RoutedMaintenance
from stream_sink.spark.foreach_batch.routing import Router, TableTemplate
from stream_sink.spark.foreach_batch.single_task import runs_in_one_task
from stream_sink.spark.options import SinkOptions, parse_options
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
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)


@dataclass
class _Runtime:
    """What the sink holds open between micro-batches of one query."""

    table: Table
    commits: SinkRuntime

    @property
    def job_id(self) -> str:
        return self.commits.job_id

    def close(self) -> None:
        self.commits.close()


class IcebergSink:
    """Exactly-once Iceberg sink for ``writeStream.foreachBatch``.

    ``mode``: ``append`` (data files only), ``overwrite`` (each batch replaces the
    partitions it writes), ``upsert`` (each row replaces its key; ``-D`` rows of an
    optional ``row_kind_column`` delete it), ``changelog`` (rows carry ``+I/-U/+U/-D``
    in ``row_kind_column``). CDC modes need ``order_by`` (source order) and equality
    fields (default: the table's identifier fields).

    ``table_column``: one stream into many tables; each row goes to the table its value
    names (``create_tables=True`` creates missing ones from ``table_template``; see
    ``.routing``), within ``namespaces`` (the namespaces whose tables rows may name) and
    ``tables`` (tables given by name), one of which is required (``.route_scope``); a
    TRUNCATE empties only a table the sink created or was given in ``tables``. Rows
    whose value names no table, or one outside that scope, stop the query, or go to
    ``dead_letter_table`` (append only, every column) when given. ``maintenance``
    then runs per table, one table's run at a time (``.routed_maintenance``).

    ``write_route``: who writes the data files in append and overwrite modes: ``"auto"``
    (Spark's own Parquet writer where it writes the table's files exactly, pyarrow
    otherwise; see ``.parquet_route``), ``"spark"`` (insist; falls back
    only where Spark cannot, or where the catalog vends the table's storage credentials,
    which s3a would not use; logged at WARNING), ``"arrow"`` (always pyarrow). CDC modes
    always use pyarrow.

    ``schema_evolution``: ``"none"`` (a DataFrame that does not fit the table stops the
    query), ``"add-columns"`` or ``"compatible"`` (the table's schema is brought up to the
    DataFrame's before the batch is written; see ``stream_sink.spark.evolution``).

    ``commit_mode``: ``"synchronous"`` (a micro-batch returns with its table commit
    done) or ``"pipelined"`` (it returns once its files are durably staged in the
    operator state; the table commit runs on a driver thread while the next batch
    writes, at most one in flight; a failed commit stops the query at the next batch,
    and a restart commits what was staged). See ``stream_sink.commit.schedule``.

    ``resume_from_table="<job id>:<batch id>"``: this query (a new checkpoint location,
    the same sink id) continues the one that recorded that source position in the table
    (``stream-sink status --table``); see ``stream_sink.commit.source_position``.

    Start the query with ``.option("checkpointLocation", sink.spark_checkpoint_location)``.
    Call ``close()`` when the query ends: it takes the final checkpoint of batches not
    yet committed (only when ``checkpoint_interval_batches`` > 1 or time-based), waits
    for the commit in flight (pipelined) and releases the operator state.
    """

    def __init__(
        self,
        *,
        catalog: Catalog,
        table: str | None = None,
        mode: str = "append",
        equality_fields: Sequence[str] | None = None,
        row_kind_column: str | None = None,
        order_by: Sequence[str] | str | None = None,
        distribution: str = "none",
        sink_id: str | None = None,
        checkpoint_location: str | None = None,
        state_dir: str = "state",
        checkpoint_interval_batches: int | None = 1,
        checkpoint_interval_ms: int | None = None,
        snapshot_properties: Mapping[str, str] | None = None,
        branch: str = "main",
        spark_checkpoint_location: str | None = None,
        metrics_port: int | None = None,
        schema_evolution: str = "none",
        table_column: str | None = None,
        namespaces: Sequence[str] | str | None = None,
        tables: Sequence[str] | None = None,
        create_tables: bool = False,
        table_template: Mapping[str, Any] | None = None,
        maintenance: MaintenanceOptions | None = None,
        dead_letter_table: str | None = None,
        write_route: str = "auto",
        commit_mode: str = "synchronous",
        resume_from_table: str | None = None,
    ) -> None:
        self.catalog = catalog
        if write_route not in ROUTES:
            raise InvalidOptionError(
                f"write_route={write_route!r}: expected one of {', '.join(ROUTES)}"
            )
        self.write_route = write_route
        self.options: SinkOptions = parse_options(
            table=table,
            mode=mode,
            equality_fields=equality_fields,
            row_kind_column=row_kind_column,
            order_by=order_by,
            distribution=distribution,
            sink_id=sink_id,
            checkpoint_location=checkpoint_location,
            spark_checkpoint_location=spark_checkpoint_location,
            state_dir=state_dir,
            checkpoint_interval_batches=checkpoint_interval_batches,
            checkpoint_interval_ms=checkpoint_interval_ms,
            snapshot_properties=snapshot_properties,
            branch=branch,
            schema_evolution=schema_evolution,
            table_column=table_column,
            commit_mode=commit_mode,
            resume_from_table=resume_from_table,
        )
        self._router: Router | None = None
        if self.options.table_column is not None:
            self._router = Router(
                catalog,
                self.options,
                TableTemplate.parse(table_template),
                create_tables,
                RouteScope.parse(namespaces, tables, dead_letter_table),
                dead_letter_table,
                maintenance,
            )
        elif create_tables or table_template or dead_letter_table or namespaces or tables:
            raise InvalidOptionError(
                "create_tables=, table_template=, dead_letter_table=, namespaces= and "
                "tables= need table_column="
            )
        else:
            _require_table(catalog, self.options.table)
        self._runtime: _Runtime | None = None
        self._opened = False  # by a batch of this run (else close may open it)
        self.maintenance_options = maintenance
        self._maintenance: SinkMaintenance | None = None
        self._plans: dict[str, BatchPlan] = {}
        self._projections: dict[str, Projection] = {}
        self._route = ""
        self._writer_metrics = WriterMetrics()
        self._committer_metrics: CommitterMetricsSnapshot | None = None
        self._gaps = BatchGaps(
            self.options.sink_id, self.options.table, self.options.spark_checkpoint_location
        )
        REGISTRY.register(self)
        self.metrics_server: MetricsServer | None = (
            None if metrics_port is None else serve(metrics_port)
        )

    @property
    def spark_checkpoint_location(self) -> str:
        """Spark's ``checkpointLocation`` for the query (``<checkpoint_location>/spark``)."""
        return self.options.spark_checkpoint_location

    @property
    def sink_id(self) -> str:
        return self.options.sink_id

    # --- starting a query --------------------------------------------------------------------

    def start(
        self,
        df: DataFrame,
        *,
        trigger: Mapping[str, Any] | None = None,
        query_name: str | None = None,
        check_executors: bool = True,
    ) -> StreamingQuery:
        """Check ``df`` against the table, then start ``df.writeStream.foreachBatch`` with
        the sink's checkpoint location.

        Before the query starts (instead of at its first micro-batch): the table exists;
        the DataFrame's columns and types fit it; the equality fields, row kind and order
        columns exist; a partitioned upsert table is partitioned by key columns only
        (all raise stream_sink errors); and, unless ``check_executors=False``, one tiny
        task checks that the executors can import stream_sink (ExecutorEnvironmentError
        saying how to fix it). ``trigger`` takes ``DataStreamWriter.trigger``'s keywords,
        e.g. ``{"processingTime": "10 seconds"}`` or ``{"availableNow": True}``.
        """
        from stream_sink.spark.preflight import check_executors as preflight

        plan_batch(df.schema, self.catalog.load_table(self.options.table), self.options)
        if check_executors:
            preflight(df.sparkSession)
        writer = df.writeStream.foreachBatch(self.foreach_batch).option(
            "checkpointLocation", self.spark_checkpoint_location
        )
        if trigger:
            writer = writer.trigger(**dict(trigger))
        if query_name:
            writer = writer.queryName(query_name)
        return writer.start()

    # --- the foreachBatch function ----------------------------------------------------------

    def foreach_batch(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` of ``df``; durable (exactly once) on return."""
        if self._router is not None:
            self._routed_batch(self._router, df, batch_id)
            return
        try:
            runtime = self._open()
            self._gaps.arrived(batch_id, runtime.commits.driver, self._spark_io())
            plan = self._plan(df, runtime.table)
            started = time.perf_counter()
            step = f"batch {batch_id}: writing its data files"
            with in_step(self.sink_id, runtime.table.name, step, NOT_ACKNOWLEDGED):
                result = self._write_changes(df, plan, runtime.table, batch_id, runtime.job_id)
            self._writer_metrics.flushed(batch_id, result, (time.perf_counter() - started) * 1e3)
            runtime.commits.record(batch_id, result)
        except BaseException as e:
            self._abandon()
            raise_if_interrupted(e, f"IcebergSink {self.sink_id}", batch_id)
            raise

    def _routed_batch(self, router: Router, df: DataFrame, batch_id: int) -> None:
        try:
            started = time.perf_counter()
            result = router.foreach_batch(df, batch_id)
            self._writer_metrics.flushed(batch_id, result, (time.perf_counter() - started) * 1e3)
        except BaseException as e:
            router.abandon()
            raise_if_interrupted(e, f"IcebergSink {self.sink_id}", batch_id)
            raise

    def release(self) -> None:
        """Release the operator state without a final checkpoint (batches already
        recorded stay durable and are committed by the next use)."""
        self._abandon()

    def end_input(self) -> None:
        """Checkpoint and commit every batch not yet committed (end of input or stop),
        also those an earlier run left staged or pending when no batch of this run came."""
        if self._router is not None:
            try:
                self._router.end_input()
            except BaseException:
                self._router.abandon()
                raise
            return
        try:
            runtime = self._runtime or self._reopen()
            if runtime is not None:
                runtime.commits.end_input()
        except BaseException:
            self._abandon()
            raise

    def _reopen(self) -> _Runtime | None:
        """The runtime, restored, when no batch of this run opened it but an earlier run
        left state (see ``runtime.left_state``); None otherwise (also after a failure:
        the next run restores)."""
        spark = self.options.spark_checkpoint_location
        io = self.catalog.io_for(spark)
        if self._opened or not left_state(self.options.sink_state_dir, spark, io):
            return None
        return self._open()

    def close(self) -> None:
        """``end_input()``, then release the operator state. The sink may be used again:
        the next batch restores from the state."""
        try:
            self._end_run_gaps()
            self.end_input()
        finally:
            self._abandon()
            self._opened = False  # the sink may serve another run
            if self._router is not None:
                self._router.run_ended()
            if self._maintenance is not None:
                self._maintenance.wait()
            if self._router is not None and self._router.maintenance is not None:
                self._router.maintenance.wait()

    # --- metrics ------------------------------------------------------------------------------

    @property
    def maintenance_metrics(self) -> MaintenanceMetricsSnapshot | None:
        """Runs, failures and conflicts of the in-job maintenance (None when not enabled);
        with ``table_column``, the sum over the tables
        (``sink.routed_maintenance.metrics_by_table`` has each)."""
        if self._router is not None and self._router.maintenance is not None:
            return self._router.maintenance.metrics
        return self._maintenance.metrics if self._maintenance is not None else None

    @property
    def routed_maintenance(self) -> RoutedMaintenance | None:
        """With ``table_column`` and ``maintenance``: each table's maintenance."""
        return self._router.maintenance if self._router is not None else None

    def metrics_snapshot(self) -> SinkMetricsSnapshot:
        """The writers' and the committer's metrics now (the committer's as of its last use
        when the sink is closed)."""
        runtime = self._runtime
        committer = runtime.commits.metrics() if runtime else self._committer_metrics
        return SinkMetricsSnapshot(
            self.sink_id,
            self.options.table,
            self._writer_metrics.snapshot(),
            committer,
            self.maintenance_metrics,
        )

    def progress_listener(
        self, on_progress: Callable[[int, SinkMetricsSnapshot], None] | None = None
    ) -> Any:
        """A StreamingQueryListener for ``spark.streams.addListener``: on each progress event
        it logs ``metrics_snapshot()`` (INFO) and passes it to ``on_progress`` with the
        event's batch id; events of the session's other queries are skipped once the sink
        knows its query id (from its first batch)."""
        from pyspark.sql.streaming import StreamingQueryListener

        sink = self

        class SinkMetricsListener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                runtime = sink._runtime
                if runtime is not None and str(event.progress.id) != runtime.job_id:
                    return  # another query of the session
                snapshot = sink.metrics_snapshot()
                log.info(
                    "sink %s: batch %s metrics %s", sink.sink_id, event.progress.batchId, snapshot
                )
                if on_progress is not None:
                    on_progress(int(event.progress.batchId), snapshot)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        return SinkMetricsListener()

    def __enter__(self) -> IcebergSink:
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._abandon()

    # --- steps --------------------------------------------------------------------------------

    def _spark_io(self) -> FileIO:
        return self.catalog.io_for(self.spark_checkpoint_location)

    def _end_run_gaps(self) -> None:
        """Batches Spark acknowledged after the last one this run handed to the sink are
        recorded and logged as skipped (:mod:`.batch_gaps`); never raises."""
        try:
            if self._router is not None:
                self._router.end_run_gaps()
            else:
                runtime = self._runtime
                self._gaps.run_ended(runtime.commits.driver if runtime else None, self._spark_io())
        except Exception as e:
            log.warning("sink %s: skipped batches not checked at close: %s", self.sink_id, e)

    def _open(self) -> _Runtime:
        """The runtime for the current query id, restoring the committer on first use."""
        job_id = iceberg_job_id(self.catalog, self.options)
        if self._runtime is not None and self._runtime.job_id == job_id:
            return self._runtime
        self._abandon()
        table = self.catalog.load_table(self.options.table)
        commits = open_iceberg(
            self.catalog, self.options, table, job_id=job_id, after_checkpoint=self._committed
        )
        self._runtime = _Runtime(table, commits)
        self._opened = True
        self._start_maintenance(commits.uncommitted_paths)
        return self._runtime

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

    def _committed(self, tables: tuple[str, ...]) -> None:
        """After each checkpoint's commit (on the commit's thread when pipelined): offer
        the metadata it left to in-job maintenance."""
        runtime = self._runtime
        if self._maintenance is not None and runtime is not None:
            table = runtime.commits.committed_table()
            assert isinstance(table, Table)
            self._maintenance.after_commit(table.metadata)

    def _abandon(self) -> None:
        if self._router is not None:
            self._router.abandon()
        runtime, self._runtime = self._runtime, None
        self._plans.clear()
        self._projections.clear()
        if runtime is not None:
            self._committer_metrics = runtime.commits.metrics()
            try:
                runtime.close()
            except Exception as e:  # closing must not hide the original error
                log.warning(
                    "sink %s: closing the operator state failed: %s", self.options.sink_id, e
                )


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
