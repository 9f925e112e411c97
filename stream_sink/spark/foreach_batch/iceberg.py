"""``IcebergSink``: a Spark ``foreachBatch`` function that writes Iceberg exactly once.

The sink parses its options, picks its destination once (:mod:`.destination`: one
table, :class:`~.one_table.OneTable`, or the tables a column names,
:class:`~.routing.Router`) and hands every micro-batch to it; what a batch goes through
(restore, checks, the write job, the commit driver) is the destination's.

Invariants:
- An error before the batch is recorded commits nothing of it: executors abort their
  writers, the error stops the query, and Spark re-runs the batch after a restart.
- Once ``foreach_batch`` returns, the batch is in durable state (or in the table), so
  Spark may acknowledge it in its commit log.
- Any error abandons the destination (state lock released); the next call restores
  afresh.

Metrics: ``metrics_snapshot()`` (writers' and committer's, see ``stream_sink.metrics.sink``);
every sink is exported by ``stream_sink.metrics.prometheus`` (served on ``metrics_port``
when given), and ``progress_listener()`` reports them on each Spark progress event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stream_sink.commit.transactions.bound import DEFAULT_HOLD_BATCHES, HoldBound
from stream_sink.exceptions import InvalidOptionError
from stream_sink.maintenance import MaintenanceMetricsSnapshot, MaintenanceOptions
from stream_sink.metrics.prometheus import REGISTRY, MetricsServer, serve
from stream_sink.metrics.sink import SinkMetricsSnapshot, WriterMetrics
from stream_sink.metrics.transactions import TransactionMetricsSnapshot
from stream_sink.spark.cdc.control_columns import check_columns
from stream_sink.spark.errors import raise_if_interrupted
from stream_sink.spark.foreach_batch.destination import Destination
from stream_sink.spark.foreach_batch.one_table import OneTable
from stream_sink.spark.foreach_batch.parquet_route import ROUTES
from stream_sink.spark.foreach_batch.routing import Router, TableTemplate
from stream_sink.spark.foreach_batch.routing.maintenance import RoutedMaintenance
from stream_sink.spark.foreach_batch.routing.scope import RouteScope
from stream_sink.spark.foreach_batch.transactions import MODES, TransactionGate
from stream_sink.spark.options import SinkOptions, parse_options
from stream_sink.spark.plan import plan_batch
from stream_sink.table.catalog.base import Catalog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)


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
    ``tables`` (tables given by name), one of which is required (``.routing.scope``); a
    TRUNCATE empties only a table the sink created or was given in ``tables``. Rows
    whose value names no table, or one outside that scope, stop the query, or go to
    ``dead_letter_table`` (append only, every column) when given. ``maintenance``
    then runs per table, one table's run at a time (``.routing.maintenance``).

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

    ``deletes``: ``"equality"`` (an update or delete of a row of an earlier batch is an
    equality delete, as Flink's sink) or ``"positions"`` (upsert/changelog only: it is
    resolved to its row's data file and position at commit and committed as a deletion
    vector on v3, a position delete file on v2; see
    ``stream_sink.commit.iceberg.position_deletes``).

    ``resume_from_table="<job id>:<batch id>"``: this query (a new checkpoint location,
    the same sink id) continues the one that recorded that source position in the table
    (``stream-sink status --table``); see ``stream_sink.commit.source_position``.

    ``transactions="debezium"``: the micro-batches come from ``from_debezium(...,
    transactions=True)`` reading Debezium's change topics and its
    ``<topic.prefix>.transaction`` topic in one query; each batch commits only the
    change rows of complete source transactions (END seen, every collection's events
    counted), and the rest are held, durably, until the batch that completes them
    (:mod:`.transactions`). ``transaction_hold_batches`` (default 10) and/or
    ``transaction_hold_ms`` bound the hold: a transaction held longer is committed as
    it is, with a WARNING and the ``forced_transactions`` count
    (``sink.transaction_metrics``).

    ``event_time_column``: a timestamp, date or long (epoch ms) column of the table; each
    commit records the lowest and highest value of it over the data files it adds, from
    their column statistics, next to its source offsets (``stream-sink.event-time-low-ms``,
    ``stream-sink.event-time-high-ms``; nothing when a file has no statistics for it). A
    column that is missing or of another type is refused when the sink opens its table.

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
        deletes: str = "equality",
        resume_from_table: str | None = None,
        event_time_column: str | None = None,
        transactions: str | None = None,
        transaction_hold_batches: int | None = DEFAULT_HOLD_BATCHES,
        transaction_hold_ms: int | None = None,
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
            deletes=deletes,
            resume_from_table=resume_from_table,
            event_time_column=event_time_column,
        )
        self._gate = _gate(
            catalog, self.options, transactions, transaction_hold_batches, transaction_hold_ms
        )
        self._writer_metrics = WriterMetrics()
        self.maintenance_options = maintenance
        self._destination: Destination
        if self.options.table_column is not None:
            self._destination = Router(
                catalog,
                self.options,
                TableTemplate.parse(table_template),
                create_tables,
                RouteScope.parse(namespaces, tables, dead_letter_table),
                dead_letter_table,
                maintenance,
                writer_metrics=self._writer_metrics,
            )
        elif create_tables or table_template or dead_letter_table or namespaces or tables:
            raise InvalidOptionError(
                "create_tables=, table_template=, dead_letter_table=, namespaces= and "
                "tables= need table_column="
            )
        else:
            self._destination = OneTable(
                catalog,
                self.options,
                write_route=write_route,
                maintenance=maintenance,
                writer_metrics=self._writer_metrics,
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
        try:
            if self._gate is not None:
                df = self._gate.admit(df, batch_id)
            else:
                check_columns(df.schema, gate=False)
            self._destination.write_batch(df, batch_id)
        except BaseException as e:
            self._abandon()
            raise_if_interrupted(e, f"IcebergSink {self.sink_id}", batch_id)
            raise

    def release(self) -> None:
        """Release the operator state without a final checkpoint (batches already
        recorded stay durable and are committed by the next use)."""
        self._abandon()

    def end_input(self) -> None:
        """Checkpoint and commit every batch not yet committed (end of input or stop),
        also those an earlier run left staged or pending when no batch of this run came."""
        try:
            self._destination.end_input()
        except BaseException:
            self._abandon()
            raise

    def close(self) -> None:
        """``end_input()``, then release the operator state. The sink may be used again:
        the next batch restores from the state."""
        try:
            self._end_run_gaps()
            self.end_input()
        finally:
            self._abandon()
            self._destination.run_ended()  # the sink may serve another run
            maintenance = self._destination.maintenance
            if maintenance is not None:
                maintenance.wait()

    # --- metrics ------------------------------------------------------------------------------

    @property
    def maintenance_metrics(self) -> MaintenanceMetricsSnapshot | None:
        """Runs, failures and conflicts of the in-job maintenance (None when not enabled);
        with ``table_column``, the sum over the tables
        (``sink.routed_maintenance.metrics_by_table`` has each)."""
        maintenance = self._destination.maintenance
        return maintenance.metrics if maintenance is not None else None

    @property
    def transaction_metrics(self) -> TransactionMetricsSnapshot | None:
        """With ``transactions``: what is held now, and the transactions committed
        complete and forced out so far (None otherwise)."""
        return None if self._gate is None else self._gate.snapshot()

    @property
    def routed_maintenance(self) -> RoutedMaintenance | None:
        """With ``table_column`` and ``maintenance``: each table's maintenance."""
        maintenance = self._destination.maintenance
        return maintenance if isinstance(maintenance, RoutedMaintenance) else None

    def metrics_snapshot(self) -> SinkMetricsSnapshot:
        """The writers' and the committer's metrics now (the committer's as of its last use
        when the sink is closed)."""
        return SinkMetricsSnapshot(
            self.sink_id,
            self.options.table,
            self._writer_metrics.snapshot(),
            self._destination.committer_metrics(),
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
                job_id = sink._destination.job_id
                if job_id is not None and str(event.progress.id) != job_id:
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

    def _end_run_gaps(self) -> None:
        """Batches Spark acknowledged after the last one this run handed to the sink are
        recorded and logged as skipped (:mod:`.batch_gaps`); never raises."""
        try:
            self._destination.end_run_gaps()
        except Exception as e:
            log.warning("sink %s: skipped batches not checked at close: %s", self.sink_id, e)

    def _abandon(self) -> None:
        self._destination.abandon()
        if self._gate is not None:
            self._gate.close()


def _gate(
    catalog: Catalog,
    options: SinkOptions,
    transactions: str | None,
    hold_batches: int | None,
    hold_ms: int | None,
) -> TransactionGate | None:
    """The hold of source transactions asked for (None: ``transactions=None``)."""
    if transactions is None:
        return None
    if transactions not in MODES:
        raise InvalidOptionError(
            f"transactions={transactions!r}: expected one of {', '.join(MODES)} or None"
        )
    return TransactionGate(catalog, options, HoldBound(hold_batches, hold_ms))
