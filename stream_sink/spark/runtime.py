"""What a front door holds open between micro-batches of one query: its table and driver.

Every front door opens its tables' committers here, so a table's commit target, state
directory and checkpoint storage are named the same way whichever door writes it:
operator id ``<sink id>`` for one table, ``<sink id>=<table>`` for a routed one. The
driver (:mod:`stream_sink.commit.driver`) then runs the protocol.

Invariants: a runtime belongs to one query id (Spark's ``<checkpoint>/metadata``); it is
opened with the batches Spark's commit log acknowledges, so the loss checks run before
anything is written; closing it never raises (it must not hide the error that led
there) and leaves what was recorded durable for the next open. With
``commit_mode="pipelined"`` the committer's target holds a table handle of its own
(loaded again from the catalog or the path), so the commit in flight and the front
door planning the next batch never share one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic

from stream_sink.checkpoints import CheckpointConfig, CheckpointCoordinator, CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.commit.delta.target import DeltaTarget
from stream_sink.commit.driver import AfterCheckpoint, CommitDriver
from stream_sink.commit.loss_check import HadInput
from stream_sink.commit.schedule import ScheduleName, schedule_for
from stream_sink.commit.source_position import ResumePoint
from stream_sink.commit.target import BatchFiles, Handle
from stream_sink.delta import DeltaTable
from stream_sink.delta.key_positions import DeltaPositionResolver, keys_folder
from stream_sink.exceptions import CheckpointError
from stream_sink.io.fileio import FileIO
from stream_sink.metrics.committer import CommitterMetricsSnapshot
from stream_sink.spark import query
from stream_sink.spark.offset_log import SparkOffsetLog
from stream_sink.spark.options import (
    DEFAULT_CHECKPOINT_ROOT,
    SPARK_CHECKPOINT_DIR,
    SinkOptions,
    resolve_location,
    to_spark_uri,
)
from stream_sink.state import state_dir_for, validate_sink_id
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.table import Table

log = logging.getLogger(__name__)


@dataclass
class SinkRuntime(Generic[Handle]):
    """One table of query ``job_id`` held open: ``table``, the front door's handle of it
    (it plans and writes batches through it), and the commit driver, in which the table
    is ``name``. The methods are the driver's seen from that one table; what concerns
    every table (``drain``, ``end_input``) is the driver's own."""

    job_id: str
    name: str
    driver: CommitDriver[Handle]
    table: Handle

    @property
    def watermark(self) -> int:
        return self.driver.watermark(self.name)

    def record(self, batch_id: int, result: BatchFiles) -> int:
        """Record ``batch_id`` (durable on return; committed when a checkpoint is due);
        the watermark after."""
        self.driver.record(batch_id, {self.name: result})
        return self.watermark

    def holds(self, batch_id: int) -> bool:
        return self.driver.holds(self.name, batch_id)

    def metrics(self) -> CommitterMetricsSnapshot:
        return self.driver.metrics()[self.name]

    def uncommitted_paths(self) -> frozenset[str]:
        """Files of batches recorded but not yet in the table (maintenance keeps them)."""
        return self.driver.committer(self.name).uncommitted_paths()

    def discard(self, batch_id: int, paths: Iterable[str], delete: Callable[[str], None]) -> None:
        """Delete the files of aborted ``batch_id`` unless the table holds the batch (then
        they are the batch's, not leftovers). A failed delete leaves a harmless orphan."""
        if self.holds(batch_id):
            return
        for path in paths:
            try:
                delete(path)
            except Exception as e:
                log.warning("sink %s: could not delete %s: %s", self.name, path, e)

    def close(self) -> None:
        """Release the operator state (never raises, see ``CommitDriver.close``)."""
        self.driver.close()


def input_reader(spark_checkpoint_location: str, io: FileIO) -> HadInput:
    """Whether a batch of the query read input, from Spark's offset log (the loss
    checks let a batch that read nothing pass, see ``commit.loss_check``)."""
    return lambda batch_id: query.batch_read_input(spark_checkpoint_location, batch_id, io)


def left_state(state_dir: str, spark_checkpoint_location: str, io: FileIO) -> bool:
    """True when a run of the query left operator state here (``state_dir`` exists and
    Spark's checkpoint names the query): a sink closed before any micro-batch of this
    run then opens it anyway, so what a crash left staged or pending (the last batch's
    commit in flight, with nothing new to read) is committed now, not at the next batch."""
    if not os.path.isdir(state_dir):
        return False
    try:
        query.read_query_id(spark_checkpoint_location, io)
    except CheckpointError:
        return False
    return True


# --- Iceberg -------------------------------------------------------------------------------


def iceberg_committer(
    catalog: Catalog, table: Table, options: SinkOptions, *, operator_id: str, job_id: str
) -> FilesCommitter[Table]:
    """A committer (not yet restored) of ``table`` under ``operator_id`` for query
    ``job_id``: state in ``<state_dir>/<operator_id>``, checkpoints under the sink's
    checkpoint location. Pipelined, its target commits through a handle of its own."""
    io = catalog.io_for(options.checkpoint_location)
    if options.commit_mode == "pipelined":
        table = catalog.load_table(table.name)
    return FilesCommitter(
        IcebergTarget(
            table,
            branch=options.branch,
            snapshot_properties=options.snapshot_property_map,
            deletes=options.deletes,
            event_time_column=options.event_time_column,
        ),
        StateDirectory(state_dir_for(options.state_dir, operator_id)),
        CheckpointStorage(options.checkpoint_location, operator_id, io),
        job_id=job_id,
        operator_id=operator_id,
        mode="overwrite" if options.mode == "overwrite" else "append",
        offsets=SparkOffsetLog(
            options.spark_checkpoint_location, catalog.io_for(options.spark_checkpoint_location)
        ),
        resume=options.resume_from_table,
    )


def iceberg_job_id(catalog: Catalog, options: SinkOptions) -> str:
    """The query id Spark's checkpoint location records for the sink."""
    spark_io = catalog.io_for(options.spark_checkpoint_location)
    return query.read_query_id(options.spark_checkpoint_location, spark_io)


def open_iceberg(
    catalog: Catalog,
    options: SinkOptions,
    table: Table,
    *,
    job_id: str | None = None,
    after_checkpoint: AfterCheckpoint[Table] | None = None,
) -> SinkRuntime[Table]:
    """The runtime of one-table sink ``options`` writing ``table``, restored (loss checks
    against Spark's commit log, then what the state holds is finished)."""
    location = options.spark_checkpoint_location
    job_id = job_id or iceberg_job_id(catalog, options)
    acknowledged = query.acknowledged_batch_ids(location, catalog.io_for(location))
    config = CheckpointConfig(options.checkpoint_interval_batches, options.checkpoint_interval_ms)
    driver: CommitDriver[Table] = CommitDriver(
        CheckpointCoordinator(config),
        schedule=schedule_for(options.commit_mode),
        after_checkpoint=after_checkpoint,
    )
    committer = iceberg_committer(
        catalog, table, options, operator_id=options.sink_id, job_id=job_id
    )
    driver.open(
        table.name, committer, acknowledged, input_reader(location, catalog.io_for(location))
    )
    return SinkRuntime(job_id, table.name, driver, table)


# --- Delta ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeltaPlaces:
    """Where a Delta sink keeps its table, state and checkpoints (locations resolved)."""

    path: str
    sink_id: str
    checkpoint_location: str
    spark_checkpoint_location: str
    state_dir: str
    """``<state_dir>/<sink id>``: the sink's operator state."""
    storage_options: dict[str, str] = field(repr=False)

    @staticmethod
    def resolve(
        path: str,
        *,
        sink_id: str | None = None,
        checkpoint_location: str | None = None,
        spark_checkpoint_location: str | None = None,
        state_dir: str = "state",
        storage_options: dict[str, str] | None = None,
    ) -> DeltaPlaces:
        """Defaults: sink id the table directory's name, checkpoints under
        ``checkpoints/<sink id>``, Spark's under ``<checkpoint_location>/spark``."""
        path = resolve_location(path)
        sink_id = validate_sink_id(sink_id or os.path.basename(path))
        root = resolve_location(checkpoint_location or f"{DEFAULT_CHECKPOINT_ROOT}/{sink_id}")
        spark_root = spark_checkpoint_location or f"{root}/{SPARK_CHECKPOINT_DIR}"
        return DeltaPlaces(
            path,
            sink_id,
            root,
            to_spark_uri(resolve_location(spark_root)),
            state_dir_for(resolve_location(state_dir), sink_id),
            dict(storage_options or {}),
        )

    def job_id(self) -> str:
        io = query.io_for(self.spark_checkpoint_location, self.storage_options)
        return query.read_query_id(self.spark_checkpoint_location, io)


def open_delta(
    places: DeltaPlaces,
    table: DeltaTable,
    mode: str,
    job_id: str,
    *,
    after_checkpoint: AfterCheckpoint[DeltaTable] | None = None,
    commit_mode: ScheduleName = "synchronous",
    resume: ResumePoint | None = None,
    event_time_column: str | None = None,
    positions: Sequence[str] | None = None,
) -> SinkRuntime[DeltaTable]:
    """The runtime of a Delta sink, restored; a checkpoint per batch (a copy-on-write
    MERGE reads the table the previous batch left: pipelined, the sink drains first).
    Pipelined, the target commits through a handle of its own. ``positions``: the key
    columns of ``deletes="positions"``, whose index the target keeps while the runtime
    lives (:mod:`stream_sink.delta.key_positions`)."""
    committing = table
    if commit_mode == "pipelined":
        committing = DeltaTable.load(table.location, storage_options=places.storage_options)
    target = DeltaTarget(committing, event_time_column=event_time_column)
    if positions:
        target = DeltaTarget(
            committing,
            event_time_column=event_time_column,
            positions=DeltaPositionResolver(positions),
            keys_folder=keys_folder(table.location, places.sink_id),
        )
    committer = FilesCommitter(
        target,
        StateDirectory(places.state_dir),
        CheckpointStorage(
            places.checkpoint_location,
            places.sink_id,
            FileIO.for_location(places.checkpoint_location, places.storage_options),
        ),
        job_id=job_id,
        operator_id=places.sink_id,
        mode="overwrite" if mode == "overwrite" else "append",
        offsets=SparkOffsetLog(
            places.spark_checkpoint_location,
            query.io_for(places.spark_checkpoint_location, places.storage_options),
        ),
        resume=resume,
    )
    location = places.spark_checkpoint_location
    io = query.io_for(location, places.storage_options)
    driver: CommitDriver[DeltaTable] = CommitDriver(
        schedule=schedule_for(commit_mode), after_checkpoint=after_checkpoint
    )
    acknowledged = query.acknowledged_batch_ids(location, io)
    driver.open(places.sink_id, committer, acknowledged, input_reader(location, io))
    return SinkRuntime(job_id, places.sink_id, driver, table)
