"""Driver side of ``format("stream_sink")`` into a Delta table (``target`` ``delta``).

The same steps as the Iceberg route (:mod:`stream_sink.spark.datasource.commit`):
``prepare_delta_write`` when the query starts (options, table, schema checks, the
executors' task), ``commit_stream``/``abort_stream`` once per micro-batch in a fresh
Python worker, which reopens the sink's runtime (:func:`stream_sink.spark.runtime.open_delta`,
the one ``DeltaSink`` uses) and hands the batch to the commit driver: one checkpoint
and one commit per micro-batch, as a copy-on-write MERGE must see the previous batch.

With ``maintenance`` (``DeltaMaintenanceOptions``) the commit then runs the in-sink
maintenance ``DeltaSink`` runs (:func:`stream_sink.delta.maintenance.after_commit`:
bounded compaction and vacuum when the version just committed makes a run due), in
the same worker after the batch is durable: its metrics and whether it left work
behind are read from and written back to ``<checkpoint-location>/<sink id>/
maintenance.json``, since nothing of the worker outlives the call. A failed run is
counted there and retried at the next due version; it never fails the batch.

In the CDC modes the commit also does the copy-on-write half of the MERGE: it removes
the keys the tasks touched from the table's live files, reading and rewriting those
files here, on the driver (Spark's commit step has no executors), against the table
as the previous batch left it. The tasks spill their keys to files and return their
paths (:mod:`stream_sink.delta.key_spill`): the commit holds the keys only when they
are at most ``driver_key_limit``, else it streams them file by file, so no batch is
too large for the driver's memory. A stream that touches many large files per batch is
better served by ``DeltaSink.foreach_batch``, which rewrites them on the executors.

Invariants: every check runs in ``prepare_delta_write``, before any file is written; a
missing table is created there from the DataFrame's schema (idempotent);
``commit_stream`` returns only when the batch is durable; ``abort_stream`` deletes a
batch's files only when the sink does not hold the batch.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from stream_sink.delta import DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.features import check_mode_allowed
from stream_sink.delta.key_spill import (
    SPILL_FOLDER,
    KeySpill,
    remove_spills,
    rewrite_spilled,
    shared_keys,
    sweep_spills,
)
from stream_sink.delta.maintenance import after_commit as maintenance_after_commit
from stream_sink.delta.maintenance import read_report, write_report
from stream_sink.delta.paths import absolute_location
from stream_sink.exceptions import InvalidOptionError, MissingColumnError, SchemaMismatchError
from stream_sink.io.fileio import FileIO
from stream_sink.metrics.maintenance_report import report_location
from stream_sink.spark.cdc.control_columns import control_columns
from stream_sink.spark.datasource.delta.options import WHERE, DeltaRouteOptions
from stream_sink.spark.datasource.delta.write import DeltaPreparedWrite, DeltaSourceTask, spills_of
from stream_sink.spark.datasource.write import TaskOutput, refuse_shared_keys, runs_as_overwrite
from stream_sink.spark.options import DEFAULT_DRIVER_KEY_LIMIT, resolve_location
from stream_sink.spark.runtime import DeltaPlaces, SinkRuntime, open_delta
from stream_sink.spark.schema_check import spark_to_arrow
from stream_sink.spark.tasks.delta import TableShape, merge_batches

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

log = logging.getLogger("stream_sink.spark.source")

BATCH_WHERE = "df.write.format('stream_sink') with target 'delta'"


def prepare_delta_write(
    options: DeltaRouteOptions, schema: StructType, *, streaming: bool, overwrite: bool
) -> DeltaPreparedWrite:
    """Check ``schema`` against the table (created when missing), plan the executors' work."""
    if options.maintenance is not None and not streaming:
        raise InvalidOptionError(
            f"{BATCH_WHERE}: the maintenance options apply to streams (they run after a "
            "stream's commits); drop them, or compact and vacuum the table with "
            "stream_sink.delta.optimize and stream_sink.delta.vacuum"
        )
    if runs_as_overwrite(
        options.mode,
        streaming=streaming,
        overwrite=overwrite,
        where=WHERE,
        batch_where=BATCH_WHERE,
    ):
        options = dataclasses.replace(options, mode="overwrite")
    columns = tuple(schema.fieldNames())
    named = {c for c in (options.row_kind_column, *options.order_by) if c}
    extra = named | control_columns(schema, row_kind_column=options.row_kind_column)
    table = _table(options, schema)
    where = f"{WHERE}: Delta table {table.location}"
    check_mode_allowed(table.snapshot.configuration, options.mode, where)
    table_cols = tuple(table.schema.names)
    lacking = [c for c in table_cols if c not in columns]
    _require(where, f"the DataFrame lacks the table's column(s) {lacking}; add them", lacking)
    unnamed = [c for c in sorted(named) if c not in columns]
    _require(
        where,
        f"the DataFrame lacks {unnamed}, named by row-kind-column or order-by; fix the option",
        unnamed,
    )
    no_key = [c for c in options.equality_fields if c not in table_cols]
    _require(where, f"the table has no key column(s) {no_key}; fix equality-fields", no_key)
    unknown = [c for c in columns if c not in table_cols and c not in extra]
    if unknown:
        raise SchemaMismatchError(
            f"{where}: the DataFrame's column(s) {unknown} are not in the table (columns: "
            f"{list(table_cols)}); select the table's columns before writing"
        )
    kept = tuple(c for c in columns if c in table_cols or c in extra)
    task = DeltaSourceTask(
        TableShape.of(table.snapshot, options.storage),
        kept,
        mode=options.mode,
        key_columns=options.equality_fields,
        row_kind_column=options.row_kind_column,
        order_columns=options.order_by,
        spill_location=_spill_location(options, table),
    )
    return DeltaPreparedWrite(options, task)


def _spill_location(options: DeltaRouteOptions, table: DeltaTable) -> str:
    """Where the tasks spill touched keys: ``<checkpoint-location>/touched-keys/<sink
    id>`` for a stream (the sink's own folder, swept at each commit), else (a batch
    write) under the table's ``_stream_sink`` folder."""
    if options.checkpoint_location is None:
        return f"{table.location}/_stream_sink/{SPILL_FOLDER}"
    root = resolve_location(options.checkpoint_location)
    return f"{root}/{SPILL_FOLDER}/{_places(options).sink_id}"


def _require(where: str, message: str, missing: list[str]) -> None:
    if missing:
        raise MissingColumnError(f"{where}: {message}")


def _table(options: DeltaRouteOptions, schema: StructType) -> DeltaTable:
    """The table at ``options.path``; created from ``schema`` without its control columns
    (:mod:`stream_sink.spark.cdc.control_columns`) when missing. ``partition-by`` must
    match an existing table's."""
    storage = options.storage
    if DeltaTable.is_delta_table(options.path, storage):
        table = DeltaTable.load(options.path, storage_options=storage)
        given, have = options.partition_by, tuple(table.partition_columns)
        if given and given != have:
            raise InvalidOptionError(
                f"{WHERE}: Delta table {table.location} is partitioned by {list(have)}, not "
                f"{list(given)}; drop the partition-by option or write to a new path"
            )
        return table
    arrow = spark_to_arrow(schema, WHERE)
    drop = control_columns(schema, row_kind_column=options.row_kind_column)
    arrow = pa.schema([f for f in arrow if f.name not in drop])
    missing = [c for c in options.partition_by if c not in arrow.names]
    if missing:
        raise MissingColumnError(f"{WHERE}: partition-by names {missing}, not in the DataFrame")
    return DeltaTable.create(
        options.path,
        arrow,
        partition_by=options.partition_by,
        configuration=dict(options.configuration),
        exist_ok=True,
        storage_options=storage,
    )


def _written(
    prepared: DeltaPreparedWrite, outputs: Sequence[TaskOutput | None], what: str
) -> tuple[DeltaBatch, list[KeySpill]]:
    """The tasks' files as one batch, and (CDC modes) the spills of the keys they
    touched, checked to be disjoint (see :func:`_discard_spills` on a refusal)."""
    present = [o for o in outputs if o is not None]
    written = merge_batches([o.result for o in present])
    spills = [spills_of(o.touched) for o in present if o.touched]
    keys = prepared.task.key_columns
    if keys and len(spills) > 1:
        shared = shared_keys(_spill_io(prepared), spills)
        refuse_shared_keys(shared, prepared.options.path, keys, what)
    return written, spills


def _spill_io(prepared: DeltaPreparedWrite) -> FileIO:
    return FileIO.for_location(prepared.task.spill_location, prepared.options.storage)


def _sweep_spills(prepared: DeltaPreparedWrite, current: Sequence[KeySpill]) -> None:
    """Delete the sink's spill files but ``current``'s: those of batches whose process
    died before their commit (Spark ran their tasks again, which spilled anew). Called
    once the sink's state is restored, before the batch's commit."""
    options = prepared.options
    if options.checkpoint_location is None:
        return
    folder = prepared.task.spill_location
    spark = options.spark_checkpoint_location
    if spark is not None and resolve_location(spark) == resolve_location(
        options.checkpoint_location
    ):
        # Spark's checkpoint location: one query's, whose older versions spilled into
        # touched-keys itself, not a folder per sink
        folder = folder.rsplit("/", 1)[0]
    gone = sweep_spills(_spill_io(prepared), folder, current)
    if gone:
        log.info("Delta sink: removed %d spill files of interrupted batches", len(gone))


def _discard_spills(prepared: DeltaPreparedWrite, outputs: Sequence[TaskOutput | None]) -> None:
    spills = [spills_of(o.touched) for o in outputs if o is not None and o.touched]
    if spills:
        remove_spills(_spill_io(prepared), spills)


def _places(options: DeltaRouteOptions) -> DeltaPlaces:
    return DeltaPlaces.resolve(
        options.path,
        sink_id=options.sink_id,
        checkpoint_location=options.checkpoint_location,
        spark_checkpoint_location=options.spark_checkpoint_location,
        state_dir=options.state_dir,
        storage_options=options.storage,
    )


def _open(options: DeltaRouteOptions) -> tuple[DeltaTable, SinkRuntime[DeltaTable]]:
    """The table and the sink's runtime for the current query, restored."""
    places = _places(options)
    job_id = places.job_id()
    table = DeltaTable.load(places.path, storage_options=places.storage_options)
    return table, open_delta(
        places,
        table,
        options.mode,
        job_id,
        resume=options.resume_from_table,
        event_time_column=options.event_time_column,
    )


def commit_stream(
    prepared: DeltaPreparedWrite, outputs: Sequence[TaskOutput | None], batch_id: int
) -> None:
    """Commit micro-batch ``batch_id`` exactly once (see module doc). In CDC modes the
    keys the batch touched are first removed from the table's live files (the
    copy-on-write half of the MERGE), against the table as the previous batch left it."""
    started = time.perf_counter()
    written, spills = _written(prepared, outputs, f"batch {batch_id}")
    options = prepared.options
    table, runtime = _open(options)
    try:
        _sweep_spills(prepared, spills)
        if spills and not runtime.holds(batch_id):
            limit = options.driver_key_limit
            rewritten = rewrite_spilled(
                table.refresh().snapshot,
                table.io,
                _spill_io(prepared),
                spills,
                options.equality_fields,
                DEFAULT_DRIVER_KEY_LIMIT if limit is None else limit,
            )
            written = DeltaBatch.merge([rewritten, written])
        watermark = runtime.record(batch_id, written)
    finally:
        runtime.close()
    _discard_spills(prepared, outputs)
    log.info(
        "Delta sink %s: committed batch %d (%d files added, watermark %d) in %.0f ms",
        runtime.name,
        batch_id,
        len(written.adds),
        watermark,
        (time.perf_counter() - started) * 1e3,
    )
    _maintain(options, table)


def _maintain(options: DeltaRouteOptions, table: DeltaTable) -> None:
    """The in-sink maintenance after a commit (see module doc); never raises."""
    if options.maintenance is None:
        return
    try:
        places = _places(options)
        location = report_location(places.checkpoint_location, places.sink_id)
        io = FileIO.for_location(location, places.storage_options)
        metrics = read_report(io, location)
        if maintenance_after_commit(table, options.maintenance, metrics):
            write_report(io, location, metrics)
            log.info("Delta sink %s: maintenance %s", places.sink_id, metrics)
    except Exception as e:  # the batch is committed: maintenance never fails it
        log.warning("Delta sink %s: maintenance not run: %s", table.location, e)


def abort_stream(
    prepared: DeltaPreparedWrite, outputs: Sequence[TaskOutput | None], batch_id: int
) -> None:
    """Delete the files of failed micro-batch ``batch_id`` unless the sink holds it; when
    the state cannot be opened nothing is deleted (an orphan is harmless)."""
    written = merge_batches([o.result for o in outputs if o is not None])
    try:
        table, runtime = _open(prepared.options)
    except Exception as e:
        log.warning("Delta sink: batch %d aborted; files kept (%s)", batch_id, e)
    else:
        try:
            runtime.discard(
                batch_id,
                written.all_paths(),
                lambda path: table.io.delete(absolute_location(table.location, path)),
            )
        finally:
            runtime.close()
    _discard_spills(prepared, outputs)


def commit_batch(prepared: DeltaPreparedWrite, outputs: Sequence[TaskOutput | None]) -> None:
    """One version for a batch write: an append, or a dynamic partition overwrite (the
    partitions the write has rows in are replaced; all of an unpartitioned table)."""
    from stream_sink.commit.delta.target import replace_partitions

    written, _ = _written(prepared, outputs, "batch write")
    _discard_spills(prepared, outputs)
    table = DeltaTable.load(prepared.options.path, storage_options=prepared.options.storage)
    txn = table.new_transaction().add_all(written.adds)
    if prepared.options.mode == "overwrite":
        replace_partitions(txn, written.adds, table.partition_columns)
        txn.commit("WRITE", {"mode": "Overwrite"})
    else:
        txn.commit("WRITE", {"mode": "Append"})


def abort_batch(prepared: DeltaPreparedWrite, outputs: Sequence[TaskOutput | None]) -> None:
    """Delete what the tasks of a failed batch write wrote (nothing was committed)."""
    written = merge_batches([o.result for o in outputs if o is not None])
    table = prepared.task.table
    io = table.io()
    for path in written.all_paths():
        try:
            io.delete(absolute_location(table.location, path))
        except Exception as e:  # an orphan is harmless
            log.warning("could not delete %s of an aborted write: %s", path, e)
