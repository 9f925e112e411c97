"""``DeltaSink``: a Spark ``foreachBatch`` function that writes a Delta table exactly once.

The same two-phase protocol as ``IcebergSink`` (the FilesCommitter behind a
:class:`~stream_sink.commit.delta.target.DeltaTarget`): executors write Parquet files,
the driver records the batch's add/remove actions durably before ``foreach_batch``
returns, and commits them with a ``txn`` action (appId ``stream-sink:<query id>:<sink
id>``, version = batch id) in the same log version.

Modes: ``append``; ``overwrite`` (dynamic partition overwrite: each batch replaces the
partitions it writes); ``upsert`` and ``changelog`` (copy-on-write MERGE by key: the
driver finds the files that may hold a touched key from their statistics, executors
rewrite them without those keys and write the batch's net changes; removes and adds
commit in one version). The MERGE's two Spark jobs share the batch, persisted once, so
a CDC batch is read from its source once, as an append's one job reads it. A MERGE
reads the table it rewrites, so every batch is checkpointed and committed before the
next is planned: with ``commit_mode="pipelined"`` the commit of a batch runs while Spark
acknowledges it and plans the next one, and a MERGE waits for it before it searches the
table's files (appends and overwrites do not: they read no file of the table). With
``deletes="positions"`` no file of the table is read while a batch is written: the
commit resolves the batch's keys to deletion vectors
(:mod:`stream_sink.delta.key_positions`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from stream_sink.commit.schedule import check_commit_mode
from stream_sink.delta import DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.features import check_mode_allowed
from stream_sink.delta.key_positions import (
    check_deletes,
    keys_folder,
    keys_location,
    positions_configuration,
    require_deletion_vectors,
    write_keys,
)
from stream_sink.delta.log import open_io
from stream_sink.delta.maintenance import DeltaMaintenanceMetrics, DeltaMaintenanceOptions
from stream_sink.delta.maintenance import after_commit as maintenance_after_commit
from stream_sink.delta.maintenance import write_report as write_maintenance_report
from stream_sink.delta.merge import conform_keys
from stream_sink.exceptions import MissingColumnError, TruncateInBatchError
from stream_sink.io.fileio import FileIO
from stream_sink.metrics.maintenance_report import report_location
from stream_sink.spark import query
from stream_sink.spark.cdc import truncation
from stream_sink.spark.cdc.control_columns import check_columns, control_columns
from stream_sink.spark.errors import (
    find_stream_sink_error,
    raise_if_interrupted,
    reraise_stream_sink_error,
)
from stream_sink.spark.foreach_batch.arrow_frames import to_arrow
from stream_sink.spark.foreach_batch.batch_gaps import BatchGaps
from stream_sink.spark.foreach_batch.copy_on_write import rewrite_touched_files
from stream_sink.spark.options import (
    CDC_MODES,
    DEFAULT_DRIVER_KEY_LIMIT,
    parse_delta_sink_options,
    resume_point,
)
from stream_sink.spark.runtime import DeltaPlaces, SinkRuntime, left_state, open_delta
from stream_sink.spark.schema_check import spark_to_arrow
from stream_sink.spark.tasks.delta import (
    DeltaAppendTask,
    DeltaInsertTask,
    TableShape,
    merge_batches,
)
from stream_sink.spark.tasks.shared import RESULT_COLUMN, RESULT_DDL

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)


class DeltaSink:
    """Exactly-once Delta Lake sink for ``writeStream.foreachBatch``.

    Start the query with ``.option("checkpointLocation", sink.spark_checkpoint_location)``.
    The table is created from the first batch's schema (with ``partition_by``) when
    ``path`` holds none: every column but the control columns (the row kind column and
    ``from_debezium``'s, see
    :mod:`stream_sink.spark.cdc.control_columns`); order columns are data. CDC modes
    need ``equality_fields`` and ``order_by``; changelog mode needs ``row_kind_column``
    (``+I/-U/+U/-D``).

    ``path`` may be an ``s3://`` URI: ``storage_options`` are then the FileIO properties
    of the store (``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``,
    ``s3.region``), used by the driver and the executors, and each log version is
    created with a conditional PUT. ``spark_checkpoint_location`` overrides where
    Spark's own checkpoint goes (default: ``<checkpoint_location>/spark``).

    ``driver_key_limit``: CDC batches with at most this many distinct keys find the files
    to rewrite on the driver; larger ones keep their keys on the executors (semi- and
    anti-joins there, see :mod:`.copy_on_write`), so no batch is too large for the driver.

    ``deletes``: how a CDC batch deletes the older rows of its keys. ``"copy-on-write"``
    (the default) finds the files holding one from their statistics and rewrites them
    (or, on a table with deletion vectors, re-marks a file that keeps at least 80% of
    its rows). ``"positions"`` reads no file of the table while the batch is written:
    the driver writes the batch's distinct keys to a keys file, and the commit looks
    them up in an index of the table's keys (kept on the driver between commits,
    rebuilt after another writer's commit) and commits deletion vectors in the same
    version as the batch's rows (:mod:`stream_sink.delta.key_positions`). It needs
    deletion vectors: a table the sink creates gets ``delta.enableDeletionVectors``, an
    existing one without them is refused. ``driver_key_limit`` does not apply: the
    driver holds each batch's distinct keys.

    ``maintenance``: bounded compaction of small files and vacuum of files removed longer
    ago than ``delta.deletedFileRetentionDuration``, run between the sink's commits
    (:mod:`stream_sink.delta.maintenance`); ``maintenance_metrics`` counts the runs.

    ``commit_mode``: ``"synchronous"`` (the default: a batch returns with its version
    committed) or ``"pipelined"`` (it returns once its actions are durably staged; the
    version is committed, and maintenance run, on a driver thread while the next batch
    writes; a CDC batch waits for it before its MERGE reads the table). Call
    ``close()`` when the query ends: it waits for the commit in flight.

    ``resume_from_table="<job id>:<batch id>"``: this query (a new checkpoint location,
    the same sink id) continues the one that recorded that source position in the table
    (``stream-sink status --table``); see ``stream_sink.commit.source_position``.

    ``event_time_column``: a timestamp, date or long (epoch ms) column of the table; each
    commit records the lowest and highest value of it over the data files it adds, from
    their column statistics, next to its source offsets (``stream-sink.event-time-low-ms``,
    ``stream-sink.event-time-high-ms`` in ``commitInfo``; nothing when a file has no
    statistics for it). A column that is missing or of another type is refused when the
    sink opens its table.
    """

    def __init__(
        self,
        *,
        path: str,
        mode: str = "append",
        partition_by: Sequence[str] | None = None,
        equality_fields: Sequence[str] | None = None,
        row_kind_column: str | None = None,
        order_by: Sequence[str] | str | None = None,
        checkpoint_location: str | None = None,
        state_dir: str = "state",
        sink_id: str | None = None,
        configuration: Mapping[str, str] | None = None,
        storage_options: Mapping[str, str] | None = None,
        spark_checkpoint_location: str | None = None,
        driver_key_limit: int = DEFAULT_DRIVER_KEY_LIMIT,
        maintenance: DeltaMaintenanceOptions | None = None,
        commit_mode: str = "synchronous",
        resume_from_table: str | None = None,
        event_time_column: str | None = None,
        deletes: str = "copy-on-write",
    ) -> None:
        self.places = DeltaPlaces.resolve(
            path,
            sink_id=sink_id,
            checkpoint_location=checkpoint_location,
            spark_checkpoint_location=spark_checkpoint_location,
            state_dir=state_dir,
            storage_options=dict(storage_options or {}),
        )
        self.sink_id = self.places.sink_id
        options = parse_delta_sink_options(
            where=f"DeltaSink {self.sink_id}",
            mode=mode,
            partition_by=partition_by,
            equality_fields=equality_fields,
            row_kind_column=row_kind_column,
            order_by=order_by,
            driver_key_limit=driver_key_limit,
        )
        self.path = self.places.path
        self.mode = options.mode
        self.partition_by = options.partition_by
        self.keys = options.equality_fields
        self.row_kind_column = options.row_kind_column
        self.order_by = options.order_by
        self.checkpoint_location = self.places.checkpoint_location
        self.spark_checkpoint_location = self.places.spark_checkpoint_location
        self.state_dir = self.places.state_dir
        self.configuration = dict(configuration or {})
        self.storage_options = self.places.storage_options
        self.driver_key_limit = driver_key_limit
        self.maintenance = maintenance
        self.commit_mode = check_commit_mode(commit_mode, where=f"DeltaSink {self.sink_id}")
        self.resume_from_table = resume_point(resume_from_table)
        self.event_time_column = (event_time_column or "").strip() or None
        self.deletes = deletes
        self._positions = check_deletes(deletes, self.mode, f"DeltaSink {self.sink_id}")
        self.maintenance_metrics = DeltaMaintenanceMetrics()
        open_io(self.path, self.storage_options)  # an unsupported store fails here, not later
        self._runtime: SinkRuntime[DeltaTable] | None = None
        self._opened = False  # by a batch of this run (else close may open it)
        self._gaps = BatchGaps(self.sink_id, self.path, self.places.spark_checkpoint_location)

    # --- foreachBatch ---------------------------------------------------------------------

    def foreach_batch(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` of ``df``; durable (exactly once) on return."""
        try:
            check_columns(df.schema, gate=False)  # DeltaSink holds no source transactions
            runtime = self._open(df)
            self._gaps.arrived(batch_id, runtime.driver, self._spark_io())
            if self.mode in CDC_MODES:
                runtime.driver.drain()  # the MERGE reads the table the last batch left
            result = self._write(df, runtime.table.refresh(), batch_id)
            runtime.record(batch_id, result)
        except BaseException as e:
            self._release()
            raise_if_interrupted(e, f"DeltaSink {self.sink_id}", batch_id)
            raise

    def _maintain_committed(self, committed: Mapping[str, DeltaTable]) -> None:
        """After each commit (on the commit's thread when pipelined): maintenance on the
        handle the commit went through."""
        for table in committed.values():
            self._maintain(table)

    def _maintain(self, table: DeltaTable) -> None:
        """A bounded maintenance run when the version just committed makes one due (the
        batch is committed: maintenance never fails it); its metrics are then written
        to ``<checkpoint_location>/<sink id>/maintenance.json``, as the Data Source
        route writes them."""
        options = self.maintenance
        if options is None:
            return
        if maintenance_after_commit(table, options, self.maintenance_metrics):
            self._write_maintenance_report()

    def _write_maintenance_report(self) -> None:
        location = report_location(self.checkpoint_location, self.sink_id)
        try:
            io = FileIO.for_location(location, self.storage_options)
            write_maintenance_report(io, location, self.maintenance_metrics)
        except Exception as e:  # a report never fails the stream
            log.warning("DeltaSink %s: maintenance report not written: %s", self.sink_id, e)

    def close(self) -> None:
        """Wait for the commit in flight (pipelined), then release the operator state;
        a failure of that commit is raised once the state is released (the next start
        commits what it left staged). When no batch of this run opened the sink but an
        earlier run left state, it is opened first, which commits what that run left."""
        try:
            self._end_run_gaps()
            runtime = self._runtime or self._reopen()
            if runtime is not None:
                runtime.driver.drain()
        finally:
            self._release()
            self._opened = False  # the sink may serve another run

    def _spark_io(self) -> FileIO:
        places = self.places
        return query.io_for(places.spark_checkpoint_location, places.storage_options)

    def _end_run_gaps(self) -> None:
        """Batches Spark acknowledged after the last one this run handed to the sink are
        recorded and logged as skipped (:mod:`.batch_gaps`); never raises."""
        runtime = self._runtime
        try:
            self._gaps.run_ended(runtime.driver if runtime else None, self._spark_io())
        except Exception as e:
            log.warning("DeltaSink %s: skipped batches not checked at close: %s", self.sink_id, e)

    def _reopen(self) -> SinkRuntime[DeltaTable] | None:
        """The runtime, restored (committing what an earlier run left staged), when no
        batch of this run opened it but an earlier run left state; None otherwise."""
        places = self.places
        spark = places.spark_checkpoint_location
        io = query.io_for(spark, places.storage_options)
        if self._opened or not DeltaTable.is_delta_table(self.path, self.storage_options):
            return None
        if not left_state(places.state_dir, spark, io):
            return None
        return self._open(None)

    def _release(self) -> None:
        """Release the operator state; never raises (a failure of a commit in flight is
        logged: it must not hide the error that led here)."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.close()  # logs, never raises: must not hide the original error

    # --- steps ------------------------------------------------------------------------------

    def _open(self, df: DataFrame | None) -> SinkRuntime[DeltaTable]:
        """The runtime for the current query id (restored on first use); the table is
        created from ``df``'s schema when there is none yet."""
        job_id = self.places.job_id()
        if self._runtime is not None and self._runtime.job_id == job_id:
            return self._runtime
        self._release()
        table = self._table(df)
        if df is not None:  # a batch to write; close() only commits what a run staged
            where = f"DeltaSink {self.sink_id} ({table.location})"
            check_mode_allowed(table.snapshot.configuration, self.mode, where)
            if self._positions:
                require_deletion_vectors(table.snapshot, where)
        self._runtime = open_delta(
            self.places,
            table,
            self.mode,
            job_id,
            after_checkpoint=self._maintain_committed,
            commit_mode=self.commit_mode,
            resume=self.resume_from_table,
            event_time_column=self.event_time_column,
            positions=self.keys if self._positions else None,
        )
        self._opened = True
        return self._runtime

    def _table(self, df: DataFrame | None) -> DeltaTable:
        options = self.storage_options
        if DeltaTable.is_delta_table(self.path, options):
            return DeltaTable.load(self.path, storage_options=options)
        assert df is not None, "a Delta table is created from a micro-batch's schema"
        schema = spark_to_arrow(df.schema, f"DeltaSink({self.path})")
        drop = control_columns(df.schema, row_kind_column=self.row_kind_column)
        schema = pa.schema([f for f in schema if f.name not in drop])
        return DeltaTable.create(
            self.path,
            schema,
            partition_by=self.partition_by,
            configuration=self._create_configuration(),
            exist_ok=True,
            storage_options=options,
        )

    def _create_configuration(self) -> dict[str, str]:
        """The configuration a new table gets: the sink's, with deletion vectors enabled
        for ``deletes="positions"``."""
        if self._positions:
            return positions_configuration(self.configuration, f"DeltaSink {self.sink_id}")
        return self.configuration

    def _write(self, df: DataFrame, table: DeltaTable, batch_id: int) -> DeltaBatch:
        shape = TableShape.of(table.snapshot, self.storage_options)
        try:
            if self.mode in CDC_MODES:
                return self._merge_changes(df, table, shape, batch_id)
            data = df.select(*table.schema.names)
            return _collect(data.mapInArrow(DeltaAppendTask(shape), RESULT_DDL))
        except Exception as e:
            reraise_stream_sink_error(e)
            raise

    def _merge_changes(
        self, df: DataFrame, table: DeltaTable, shape: TableShape, batch_id: int
    ) -> DeltaBatch:
        """``_merge`` of the batch read from its source once: its changes (``_changes``)
        are persisted before the first of the MERGE's jobs reads them and unpersisted when
        the MERGE ends, however it ends. Memory and disk (deserialized, as
        ``Dataset.persist`` keeps a DataFrame by default): the partitions of a batch too
        large for the executors' memory go to their local disk instead of being read from
        the source again (with memory only) or failing the batch."""
        from pyspark import StorageLevel

        changes = self._changes(df, table).persist(StorageLevel.MEMORY_AND_DISK_DESER)
        try:
            return self._merge_or_truncate(changes, table, shape, batch_id)
        finally:
            changes.unpersist()

    def _changes(self, df: DataFrame, table: DeltaTable) -> DataFrame:
        """The batch as the MERGE takes it: the table's columns, the row kind and the
        order columns; in upsert mode without its ``-U`` rows (an update's before image
        changes nothing there)."""
        from pyspark.sql import functions as F

        missing = [c for c in (*self.keys, *self.order_by) if c not in df.columns]
        if missing:
            raise MissingColumnError(f"DeltaSink {self.sink_id}: the batch lacks {missing}")
        if self.mode == "upsert" and self.row_kind_column:
            df = df.where(F.col(self.row_kind_column) != "-U")
        kind = [self.row_kind_column] if self.row_kind_column else []
        cols = [_column_or_null(df, f) for f in table.schema] + [F.col(c) for c in kind]
        names = [*table.schema.names, *kind]
        return df.select(*cols, *[c for c in self.order_by if c not in names])

    def _merge_or_truncate(
        self, changes: DataFrame, table: DeltaTable, shape: TableShape, batch_id: int
    ) -> DeltaBatch:
        """``_merge``; a batch holding a TRUNCATE (row kind ``-T``) is merged again from
        after its last one into an empty table, as a batch whose commit removes every
        live file (:mod:`stream_sink.spark.cdc.truncation`). The filter that finds the
        truncate sits above the persisted ``changes``, so the failed first attempt leaves
        them cached and the second reads them from there, not from the source. (Spark
        drops the metrics of failed tasks, so a truncating batch's ``numInputRows`` counts
        only the partitions the first attempt read without failing: 0 for one partition.)"""
        kind = self.row_kind_column
        if not kind:
            return self._merge(changes, table, shape)
        try:
            return self._merge(truncation.flagged(changes, kind), table, shape)
        except Exception as e:
            if not isinstance(find_stream_sink_error(str(e)) or e, TruncateInBatchError):
                raise
            at = truncation.last_truncate(changes, kind, self.order_by)
            if at is None:  # pragma: no cover (the marker fires only on a -T row)
                raise
        log.info("DeltaSink %s: batch %d truncates %s", self.sink_id, batch_id, self.path)
        rest = truncation.after(changes, kind, self.order_by, at)
        merged = self._merge(rest, table, shape, empty=True)
        return DeltaBatch(merged.adds, (), truncate=True)

    def _deletes(self, keys_df: DataFrame, table: DeltaTable, shape: TableShape) -> DeltaBatch:
        """What deletes the older rows of the batch's keys: copy-on-write rewrites (or
        re-marks) the files holding one now; positions writes the keys, resolved at
        commit (the driver then holds the batch's distinct keys)."""
        if self._positions:
            return _positions_keys(keys_df, table, self.sink_id)
        snapshot = table.snapshot
        return rewrite_touched_files(keys_df, snapshot, shape, self.keys, self.driver_key_limit)

    def _merge(
        self, changes: DataFrame, table: DeltaTable, shape: TableShape, empty: bool = False
    ) -> DeltaBatch:
        """Copy-on-write MERGE of the batch's ``changes`` (see module docstring): a job
        over their distinct keys finds and rewrites the files holding one (the first to
        read the batch: a filter on the rows, such as the truncate marker, fails it
        before any file is written), then a job writes the net changes shuffled by key;
        ``empty``: into the table as emptied by a truncate (no file of it is read or
        rewritten, one job)."""
        from pyspark.sql import functions as F

        parts: list[DeltaBatch] = []
        if not empty:
            types = _spark_schema(table.schema)
            keys_df = changes.select(
                *(F.col(k).cast(types[k].dataType).alias(k) for k in self.keys)
            ).distinct()
            keys_df = keys_df.persist()
            try:
                parts.append(self._deletes(keys_df, table, shape))
            finally:
                keys_df.unpersist()
        spread = changes.repartition(*self.keys).sortWithinPartitions(*self.keys, *self.order_by)
        insert = DeltaInsertTask(
            shape,
            self.keys,
            "changelog" if self.mode == "changelog" else "upsert",
            self.row_kind_column,
            self.order_by,
        )
        parts.append(_collect(spread.mapInArrow(insert, RESULT_DDL)))
        return DeltaBatch.merge(parts)


def _positions_keys(keys_df: DataFrame, table: DeltaTable, sink_id: str) -> DeltaBatch:
    """The batch's distinct keys in a keys file, resolved to deletion vectors at commit
    (:mod:`stream_sink.delta.key_positions`); no file of the table is read here."""
    keys = to_arrow(keys_df)
    if not keys.num_rows:
        return DeltaBatch()
    path = keys_location(keys_folder(table.location, sink_id))
    write_keys(table.io, path, conform_keys(keys, table.schema))
    return DeltaBatch(keys=(path,))


def _collect(df: Any) -> DeltaBatch:
    return merge_batches([bytes(r[RESULT_COLUMN]) for r in df.collect()])


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _column_or_null(df: DataFrame, field: pa.Field) -> Column:
    """Column ``field`` of ``df``, or a typed null when ``df`` lacks it: a batch of
    deletes by key only (Debezium tombstones) carries no other column, and a delete
    needs none."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    if field.name in df.columns:
        return F.col(f"`{field.name}`")
    return F.lit(None).cast(from_arrow_type(field.type)).alias(field.name)
