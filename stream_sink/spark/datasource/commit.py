"""Driver side of ``format("stream_sink")``: plan each micro-batch's write, and
commit or abort what the executors wrote.

Spark runs each of these in a Python worker on the driver: ``prepare_write`` whenever
it asks for a writer (for every micro-batch, and more than once for some: so each
batch's executors get the table, and its storage credentials, as loaded for that
batch), ``commit_stream``/``abort_stream`` once per micro-batch. Spark reuses those
workers; each keeps its catalog clients (:mod:`.catalogs`), so a REST catalog's config
and token are not asked for again, while the table is loaded anew for every call. Each
commit reopens the sink's runtime
(:func:`stream_sink.spark.runtime.open_iceberg`: the query id from Spark's checkpoint
location, the operator state, the committer restored, which finishes whatever a crash
left), hands the batch to the commit driver, which records it, checkpoints and commits
it, then releases the state: the protocol ``IcebergSink.foreach_batch`` runs, through
the same driver.

With ``maintenance`` (``MaintenanceOptions``) the commit then runs the in-sink
maintenance ``IcebergSink`` runs (:mod:`stream_sink.maintenance.in_sink`: triggers,
the maintenance lock, bounded runs, backlog, retries), through
:func:`stream_sink.maintenance.per_commit.maintain_after_commit`: after the batch is
committed and the operator state released, in the same worker, with the triggers'
counts and the metrics read from and written back to ``<checkpoint-location>/<sink
id>/maintenance.json``. ``IcebergSink`` runs maintenance in a background thread that
races its next micro-batches; here no thread can: Spark discards the worker when
``commit_stream`` returns, which would kill a run mid-way (its lease held, its work
lost) at every batch. So a due run runs in the foreground, which is correct (the
batch is already committed and durable, the run commits through the catalog like any
other maintainer, and a run killed with the worker leaves only what any killed run
leaves: a lease its owner takes back, orphan files), and costs this micro-batch the
run's time, bounded by ``MaintenanceOptions``' per-run limits; batches with no run due
pay one small report read and write. A failed run never fails the batch: it is
counted, retried after later commits, and reported as ``failing`` after
``failures_before_alert`` in a row, as in ``IcebergSink``.

Invariants:
- Every check of the DataFrame against the table runs in ``prepare_write``, so a bad
  option or schema fails the query at its start, before any file is written.
- ``commit_stream`` returns only when the batch is durable (in state or in the
  table): Spark writes its commit log entry after it returns.
- ``abort_stream`` deletes a batch's files only when the sink does not hold the batch.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from stream_sink.commit.iceberg.event_time import event_time_field
from stream_sink.exceptions import InvalidOptionError
from stream_sink.maintenance.lease_lock import sink_lock_location
from stream_sink.maintenance.per_commit import maintain_after_commit
from stream_sink.metrics.maintenance_report import report_location
from stream_sink.spark.cdc.control_columns import check_columns
from stream_sink.spark.datasource.catalogs import kept_catalog
from stream_sink.spark.datasource.delta.options import DeltaRouteOptions
from stream_sink.spark.datasource.options import SourceOptions, parse_route_options
from stream_sink.spark.datasource.write import (
    PreparedWrite,
    SourceWriteTask,
    TaskOutput,
    check_keys_disjoint,
    runs_as_overwrite,
)
from stream_sink.spark.plan import plan_batch
from stream_sink.spark.runtime import SinkRuntime, open_iceberg
from stream_sink.spark.tasks.iceberg import merge_results
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.table import Table
from stream_sink.write.file_factory import new_operation_id
from stream_sink.write.result import WriteResult
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from stream_sink.spark.datasource.delta.write import DeltaPreparedWrite

log = logging.getLogger("stream_sink.spark.source")


def prepare_write(
    options: Mapping[str, str], schema: StructType, *, streaming: bool, overwrite: bool
) -> PreparedWrite | DeltaPreparedWrite:
    """Parse ``options``, check ``schema`` against the table, plan the executors' work
    (a Delta target's: :func:`.delta.commit.prepare_delta_write`)."""
    check_columns(schema, gate=False)  # the route holds no source transactions
    route = parse_route_options(options, streaming=streaming)
    if isinstance(route, DeltaRouteOptions):
        from stream_sink.spark.datasource.delta.commit import prepare_delta_write

        return prepare_delta_write(route, schema, streaming=streaming, overwrite=overwrite)
    parsed = route
    sink = parsed.sink
    if parsed.maintenance is not None and not streaming:
        raise InvalidOptionError(
            "df.write.format('stream_sink'): the maintenance options apply to streams (they "
            "run after a stream's commits); drop them, or maintain the table with "
            "table.maintenance (rewrite_data_files, expire_snapshots, ...) or "
            "`stream-sink maintain TABLE`"
        )
    if runs_as_overwrite(
        sink.mode,
        streaming=streaming,
        overwrite=overwrite,
        where="format('stream_sink')",
        batch_where="df.write.format('stream_sink')",
        hint=" (table.upsert() upserts a batch)",
    ):
        sink = dataclasses.replace(sink, mode="overwrite")
        parsed = dataclasses.replace(parsed, sink=sink)
    with _catalog(parsed) as catalog:
        table = catalog.load_table(sink.table)
    if sink.event_time_column:  # before any file is written, not at the first commit
        event_time_field(table.metadata.schema, sink.event_time_column, table=sink.table)
    plan = plan_batch(schema, table, sink)
    factory = TaskWriterFactory.for_table(
        table,
        equality_fields=plan.equality_fields,
        upsert=sink.mode == "upsert",
        operation_id=new_operation_id(),
        cdc_options=plan.cdc_options,
    )
    task = SourceWriteTask(
        factory,
        plan.columns,
        insert_kind_column=plan.insert_kind_column,
        key_columns=plan.equality_fields if sink.is_cdc else (),
        order_columns=sink.order_by if sink.is_cdc else (),
        row_kind_column=sink.row_kind_column if sink.is_cdc else None,
    )
    return PreparedWrite(parsed, task)


def _catalog(options: SourceOptions) -> AbstractContextManager[Catalog]:
    """The worker process's client of the options' catalog (:mod:`.catalogs`)."""
    return kept_catalog(options.catalog_name, dict(options.catalog))


def _merged(
    prepared: PreparedWrite, outputs: Sequence[TaskOutput | None], what: str
) -> WriteResult:
    present = [o for o in outputs if o is not None]
    if prepared.task.key_columns:
        check_keys_disjoint(present, prepared.options.sink.table, prepared.task.key_columns, what)
    return merge_results([o.result for o in present])


def commit_stream(
    prepared: PreparedWrite, outputs: Sequence[TaskOutput | None], batch_id: int
) -> None:
    """Commit micro-batch ``batch_id`` exactly once (see module doc)."""
    started = time.perf_counter()
    result = _merged(prepared, outputs, f"batch {batch_id}")
    opts = prepared.options.sink
    with _catalog(prepared.options) as catalog:
        table = catalog.load_table(opts.table)
        handed: dict[str, Table] = {}
        runtime = open_iceberg(catalog, opts, table, after_checkpoint=handed.update)
        try:
            watermark = runtime.record(batch_id, result)
            committed = _committed(runtime, handed.get(runtime.name, table), prepared.options)
        finally:
            runtime.close()
        rows = sum(f.record_count for f in result.data_files)
        ms = (time.perf_counter() - started) * 1e3
        log.info(
            "sink %s: committed batch %d (%d rows, %d data files, %d delete files, "
            "watermark %d) in %.0f ms",
            opts.sink_id,
            batch_id,
            rows,
            len(result.data_files),
            len(result.delete_files),
            watermark,
            ms,
        )
    if committed is not None:
        _maintain(prepared.options, catalog, *committed)


def _committed(
    runtime: SinkRuntime[Table], table: Table, options: SourceOptions
) -> tuple[Table, frozenset[str]] | None:
    """With maintenance on: ``table`` as the commit left it (the handle the after-checkpoint
    hook handed over; a replay commits nothing, and the synchronous route's target commits
    through the handle loaded for the batch), and the files the sink still holds
    uncommitted (none once a batch is committed; kept from orphan removal)."""
    if options.maintenance is None:
        return None
    return table, runtime.uncommitted_paths()


def _maintain(
    options: SourceOptions, catalog: Catalog, table: Table, protected: frozenset[str]
) -> None:
    """The in-sink maintenance after a commit (see module doc); never raises."""
    maintenance = options.maintenance
    assert maintenance is not None
    sink = options.sink
    started = time.perf_counter()
    try:
        report = report_location(sink.checkpoint_location, sink.sink_id)
        done = maintain_after_commit(
            lambda: catalog.load_table(sink.table),
            table.metadata,
            maintenance,
            owner=f"sink:{sink.sink_id}",
            io=catalog.io_for(report),
            report=report,
            lock_location=sink_lock_location(sink.checkpoint_location, sink.sink_id),
            protected=protected,
        )
    except Exception as e:  # the batch is committed: maintenance never fails it
        log.warning("sink %s: maintenance not run: %s", sink.sink_id, e)
        return
    if done.ran:
        log.info(
            "sink %s: maintenance run in %.0f ms: %s",
            sink.sink_id,
            (time.perf_counter() - started) * 1e3,
            done.metrics,
        )


def abort_stream(
    prepared: PreparedWrite, outputs: Sequence[TaskOutput | None], batch_id: int
) -> None:
    """Delete the files of failed micro-batch ``batch_id`` unless the sink holds it."""
    result = merge_results([o.result for o in outputs if o is not None])
    opts = prepared.options.sink
    with _catalog(prepared.options) as catalog:
        table = catalog.load_table(opts.table)
        try:
            runtime = open_iceberg(catalog, opts, table)
        except Exception as e:
            log.warning(
                "sink %s: batch %d aborted; its files are kept (state unavailable: %s)",
                opts.sink_id,
                batch_id,
                e,
            )
            return
        try:
            runtime.discard(batch_id, result.all_paths(), table.io.delete)
        finally:
            runtime.close()


def commit_batch(prepared: PreparedWrite, outputs: Sequence[TaskOutput | None]) -> None:
    """One snapshot for a batch write: an append, or a dynamic partition overwrite."""
    result = _merged(prepared, outputs, "batch write")
    opts = prepared.options.sink
    with _catalog(prepared.options) as catalog:
        table = catalog.load_table(opts.table)
        if opts.mode == "overwrite":
            op = table.new_replace_partitions(opts.branch).set_all(opts.snapshot_property_map)
            for f in result.data_files:
                op.add_file(f)
            op.commit()
        else:
            commit_write_result(
                table, result, snapshot_properties=opts.snapshot_property_map, branch=opts.branch
            )


def abort_batch(prepared: PreparedWrite, outputs: Sequence[TaskOutput | None]) -> None:
    """Delete what the tasks of a failed batch write wrote (nothing was committed)."""
    result = merge_results([o.result for o in outputs if o is not None])
    io = prepared.task.factory.io
    for path in result.all_paths():
        try:
            io.delete(path)
        except Exception as e:  # an orphan is harmless
            log.warning("could not delete %s of an aborted write: %s", path, e)
