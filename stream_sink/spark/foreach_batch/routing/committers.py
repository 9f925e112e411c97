"""The per-table committers of a routed sink, for one query, behind one commit driver.

Each table the sink writes has its own committer, operator id ``<sink id>=<table>``
(its own state, checkpoints and watermark; ``spark.runtime.iceberg_committer``), opened
when the sink opens for every table of the registry (:mod:`.registry`), or when a batch
first brings the table. One :class:`~stream_sink.commit.driver.CommitDriver` drives
them all: a checkpoint commits every table with work, each under its own watermark.

Invariants:
- Exactly once per table: a crash between two tables' commits leaves the committed
  table's watermark above the batch (its replay is dropped) and the other table's batch
  pending or staged in its own state (committed on restart, or written by the replay).
  Tables absent from a batch are not touched by it.
- Where the catalog commits tables together, no reader sees them apart, a restart
  included: the tables of the registry are restored with their leftovers kept
  (``defer_commit``), then committed as one checkpoint
  (:meth:`~stream_sink.commit.driver.CommitDriver.commit_restored`); a batch some
  tables recorded before a crash commits everywhere with the checkpoint after its re-run.
- Loss detection from Spark's commit log works per table: before any table records a
  batch, the route log (``<sink id>.routes.json``, :mod:`stream_sink.checkpoints.route_log`)
  records which tables the batch wrote, and a table being restored checks only the
  acknowledged batches recorded for it; after each checkpoint's commits the route log
  forgets what every table's watermark covers.
- The route log is the commit's too (pipelined): it is read or written only with no
  commit in flight (the driver drained) or on the commit's thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from stream_sink.checkpoints import CheckpointConfig, CheckpointCoordinator
from stream_sink.checkpoints.route_log import RouteLog
from stream_sink.commit.driver import AfterCheckpoint, CommitDriver
from stream_sink.commit.iceberg.multi_table import commit_together, log_commit_mode
from stream_sink.commit.schedule import schedule_for
from stream_sink.spark import query
from stream_sink.spark.foreach_batch.routing.maintenance import RoutedMaintenance
from stream_sink.spark.options import SinkOptions
from stream_sink.spark.runtime import iceberg_committer, input_reader
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult


@dataclass
class TableSink:
    """One routed table as its committer writes it: the front door's handle of the
    table and the sink's options made the table's own (``table=<name>``, no routing)."""

    table: Table
    options: SinkOptions


class RoutedCommits:
    """The committers of one query's routed tables (see module); made by :meth:`open`."""

    def __init__(
        self,
        catalog: Catalog,
        options: SinkOptions,
        job_id: str,
        driver: CommitDriver[Table],
        maintenance: RoutedMaintenance | None,
    ) -> None:
        self.catalog = catalog
        self.options = options
        self.job_id = job_id
        self.driver = driver
        self.maintenance = maintenance
        self.tables: dict[str, TableSink] = {}
        location = options.spark_checkpoint_location
        spark_io = catalog.io_for(location)
        self.acknowledged = query.acknowledged_batch_ids(location, spark_io)
        """Batches Spark had acknowledged when the committers were opened."""
        self.routes = RouteLog(
            catalog.io_for(options.checkpoint_location),
            f"{options.checkpoint_location}/{options.sink_id}.routes.json",
            job_id,
        )

    @staticmethod
    def open(
        catalog: Catalog,
        options: SinkOptions,
        job_id: str,
        names: Iterable[str],
        maintenance: RoutedMaintenance | None,
        after_checkpoint: AfterCheckpoint[Table],
    ) -> RoutedCommits:
        """The committers of query ``job_id``, each table of ``names`` restored (closed
        again when one fails). Where ``catalog`` commits several tables in one
        transaction, a checkpoint's tables commit together (with ``deletes="positions"``
        each table's deletes resolved at the head its attempt refreshed), and so does
        what a crash left in them (restored deferred, then committed as one checkpoint);
        elsewhere one after another, as the start's log line says."""
        config = CheckpointConfig(
            options.checkpoint_interval_batches, options.checkpoint_interval_ms
        )
        atomic = log_commit_mode(catalog, options.sink_id)
        driver: CommitDriver[Table] = CommitDriver(
            CheckpointCoordinator(config),
            schedule=schedule_for(options.commit_mode),
            after_checkpoint=after_checkpoint,
            commit_together=commit_together if atomic else None,
        )
        commits = RoutedCommits(catalog, options, job_id, driver, maintenance)
        try:
            for name in names:
                commits.open_table(name, defer_commit=atomic)
            if atomic:
                commits.committed(driver.commit_restored(commits.acknowledged))
        except BaseException:
            commits.close()
            raise
        return commits

    def open_table(self, name: str, *, defer_commit: bool = False) -> TableSink:
        """The committer of table ``name``, restored (with ``defer_commit``, what a crash
        left is kept for the driver's ``commit_restored``); the acknowledged batches the
        route log records for the table must be accounted for (``loss_check``)."""
        self.driver.drain()  # the route log is the commit's too (pipelined)
        opts = self.options
        table = self.catalog.load_table(name)
        committer = iceberg_committer(
            self.catalog, table, opts, operator_id=f"{opts.sink_id}={name}", job_id=self.job_id
        )
        acknowledged = self.routes.acknowledged_for(name, self.acknowledged)
        location = opts.spark_checkpoint_location
        reader = input_reader(location, self.catalog.io_for(location))
        self.driver.open(name, committer, acknowledged, reader, defer_commit=defer_commit)
        if self.maintenance is not None:
            self.maintenance.open_table(name, committer.uncommitted_paths)
        sink = TableSink(table, replace(opts, table=name, table_column=None))
        self.tables[name] = sink
        return sink

    def record(self, batch_id: int, results: Mapping[str, WriteResult]) -> None:
        """Record ``batch_id``'s result in each table it wrote (the route log first)."""
        self.driver.drain()  # the route log is the commit's too (pipelined)
        if results:  # before any table records it: the loss check reads it per table
            self.routes.record(batch_id, results)
        self.driver.record(batch_id, results)

    def committed(self, committed: Mapping[str, Table]) -> None:
        """After each checkpoint's commits (on the commit's thread when pipelined): the
        route log forgets what every table's watermark covers; the committed tables are
        offered to their maintenance with the metadata the commits left."""
        self.routes.drop_committed(self.driver.watermarks())
        if self.maintenance is not None and committed:
            self.maintenance.after_checkpoint(
                {name: table.metadata for name, table in committed.items()}
            )

    def close(self) -> None:
        self.driver.close()
