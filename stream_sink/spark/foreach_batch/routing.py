"""One stream into many tables: ``IcebergSink(table_column=..., create_tables=True)``.

Per micro-batch (driver):
1. (first call) open the committer of every table the sink has ever written (the
   registry ``<checkpoint_location>/<sink id>.tables.json``) and ``restore()`` each: what
   a crash left staged or pending for a table is committed for that table alone.
2. One aggregate over the batch finds its tables, the columns that carry values for
   each, and the Debezium key fields (``from_debezium(key_column=...)``).
3. Each routing value is checked against the sink's scope (:mod:`.route_scope`: the
   namespaces and tables the operator allows, names fit for every catalog) and each
   TRUNCATE against the tables the sink owns, before anything is created. Each table is
   then resolved: loaded, or created from ``table_template`` when ``create_tables=True``
   (recorded as created, and registered before anything is written to it); a routing
   value naming no table raises an error naming the value. With schema evolution on,
   each table's schema is brought up to the columns that carry values for it.
4. ONE Spark job writes every table: rows are hashed by (table, keys) and sorted by
   (table, keys, order) in CDC modes; each task routes its rows to one TaskWriter per
   table and returns (table, WriteResult) rows.
5. Each table's committer processes its result (a durable pending entry); when a
   checkpoint is due every table with pending batches is checkpointed and committed,
   each under its own operator id ``<sink id>=<table>`` and so with its own watermark.
6. With ``maintenance=``, the committed tables are offered to their own maintenance
   triggers; at most one table's run at a time (:mod:`.routed_maintenance`).

Invariants:
- Exactly once per table: a crash between two tables' commits leaves the committed
  table's watermark above the batch (its replay is dropped) and the other table's
  batch pending or staged in its own state (committed on restart, or written by the
  replay). Tables absent from a batch are not touched by it.
- A column that carries values for a table that does not have it stops the query
  (SchemaMismatchError naming table and column) unless schema evolution adds it:
  nothing is silently dropped.
- Loss detection from Spark's commit log works per table: before any table processes a
  batch, the sink records which tables the batch wrote (``<sink id>.routes.json``, see
  :mod:`stream_sink.checkpoints.route_log`), and on restore each table checks only the
  acknowledged batches recorded for it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.checkpoints import CheckpointConfig, CheckpointCoordinator
from stream_sink.checkpoints.route_log import RouteLog
from stream_sink.commit.driver import CommitDriver
from stream_sink.commit.schedule import schedule_for
from stream_sink.exceptions import (
    AlreadyExistsError,
    InvalidOptionError,
    SchemaMismatchError,
    ValidationError,
)
from stream_sink.io.fileio import FileIO
from stream_sink.maintenance import MaintenanceOptions
from stream_sink.metrics.committer import CommitterMetricsSnapshot
from stream_sink.metrics.sink import WriterMetrics
from stream_sink.spark import query, schema_check
from stream_sink.spark.cdc import distribution, truncation
from stream_sink.spark.cdc.control_columns import KEY_FIELDS_COLUMN, data_columns
from stream_sink.spark.errors import reraise_stream_sink_error
from stream_sink.spark.evolution import HINT_NONE, evolve_for_batch
from stream_sink.spark.foreach_batch.batch_gaps import BatchGaps
from stream_sink.spark.foreach_batch.route_scope import RouteScope
from stream_sink.spark.foreach_batch.routed_maintenance import RoutedMaintenance
from stream_sink.spark.options import SinkOptions
from stream_sink.spark.plan import BatchPlan, plan_batch
from stream_sink.spark.runtime import (
    iceberg_committer,
    input_reader,
    left_state,
)
from stream_sink.spark.tasks.iceberg import with_insert_kind
from stream_sink.spark.tasks.shared import current_task_ids
from stream_sink.table.catalog.base import Catalog, table_identifier
from stream_sink.table.catalog.metadata_files import STREAMING_METADATA_PROPERTIES
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult
from stream_sink.write.task_writers import TaskWriter
from stream_sink.write.writer_factory import TaskWriterFactory

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

ROUTED_DDL = "table string, result binary"
_ROUTED_SCHEMA = pa.schema([pa.field("table", pa.string()), pa.field("result", pa.binary())])


# --- the registry of tables ------------------------------------------------------------------


class TableRegistry:
    """The tables a routed sink has written, and apart from them those it created
    itself (each a JSON list, replaced atomically; a table is recorded as created
    after it is, so a crash in between leaves it owned by no one, never the reverse)."""

    def __init__(self, catalog: Catalog, location: str) -> None:
        self._io = catalog.io_for(location)
        self._location = location
        self._created_location = location.removesuffix(".tables.json") + ".created.json"

    def load(self) -> list[str]:
        return self._read(self._location)

    def created(self) -> list[str]:
        return self._read(self._created_location)

    def add(self, name: str) -> None:
        self._add(self._location, name)

    def add_created(self, name: str) -> None:
        self._add(self._created_location, name)

    def _read(self, location: str) -> list[str]:
        if not self._io.exists(location):
            return []
        return [str(t) for t in json.loads(self._io.read_bytes(location))]

    def _add(self, location: str, name: str) -> None:
        names = self._read(location)
        if name not in names:
            self._io.write_atomic(location, json.dumps([*names, name]).encode())


# --- executor side ----------------------------------------------------------------------------


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


# --- driver side ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableTemplate:
    """How tables are created on first sight (``table_template=dict(...)``)."""

    partition_spec: tuple[Any, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    identifier_fields: Mapping[str, tuple[str, ...]] | tuple[str, ...] = ()
    schemas: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> TableTemplate:
        raw = dict(raw or {})
        known = {"partition_spec", "properties", "identifier_fields", "schemas", "format_version"}
        unknown = set(raw) - known
        if unknown:
            raise InvalidOptionError(
                f"table_template has unknown keys {sorted(unknown)}; known: partition_spec, "
                "properties, identifier_fields, schemas, format_version"
            )
        props = {str(k): str(v) for k, v in (raw.get("properties") or {}).items()}
        if raw.get("format_version") is not None:
            props["format-version"] = str(int(raw["format_version"]))
        ids = raw.get("identifier_fields") or ()
        ids = {k: tuple(v) for k, v in ids.items()} if isinstance(ids, Mapping) else tuple(ids)
        return TableTemplate(
            tuple(raw.get("partition_spec") or ()),
            props,
            ids,
            dict(raw.get("schemas") or {}),
        )

    def keys_for(self, name: str, from_data: Sequence[str]) -> tuple[str, ...]:
        if isinstance(self.identifier_fields, Mapping):
            return tuple(self.identifier_fields.get(name, ())) or tuple(from_data)
        return tuple(self.identifier_fields) or tuple(from_data)


@dataclass
class _TableSink:
    table: Table
    options: SinkOptions


@dataclass
class RoutedRuntime:
    job_id: str
    tables: dict[str, _TableSink]
    driver: CommitDriver[Table]
    routes: RouteLog
    acknowledged: list[int] = field(default_factory=list)
    """Batches Spark had acknowledged when the runtime was opened."""

    def close(self) -> None:
        self.driver.close()


@dataclass(frozen=True)
class BatchTables:
    """What the discovery aggregate found: per table, its columns with values and key."""

    columns: Mapping[str, frozenset[str]]
    keys: Mapping[str, tuple[str, ...]]
    dead: tuple[Any, ...] = ()
    """Routing values whose rows go to the dead-letter table."""
    truncated: Mapping[str, Any] = field(default_factory=dict)
    """Tables the batch truncates: the position (as collected) of the last truncate."""


class Router:
    """The routed half of IcebergSink (see module docstring)."""

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
        self.catalog = catalog
        self._writer_metrics = writer_metrics or WriterMetrics()
        self.scope = scope
        self.maintenance = (
            None
            if maintenance is None
            else RoutedMaintenance(
                catalog, maintenance, options.sink_id, options.checkpoint_location
            )
        )
        self.dead_letter = dead_letter_table
        self.options = options
        self.template = template
        self.create_tables = create_tables
        self.registry = TableRegistry(
            catalog, f"{options.checkpoint_location}/{options.sink_id}.tables.json"
        )
        self.runtime: RoutedRuntime | None = None
        self._opened = False  # by a batch of this run (else close may open it)
        self.gaps = BatchGaps(options.sink_id, "routed tables", options.spark_checkpoint_location)

    @property
    def table_column(self) -> str:
        assert self.options.table_column is not None
        return self.options.table_column

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

    # --- per batch ---------------------------------------------------------------------------

    def foreach_batch(self, df: DataFrame, batch_id: int) -> WriteResult:
        runtime = self.open()
        self.gaps.arrived(batch_id, runtime.driver, self._spark_io())
        df = df.persist()
        try:
            found = self.discover(df)
            plans = {
                name: self._prepare_table(runtime, name, df.schema, found)
                for name in sorted(found.columns)
            }
            for name in found.truncated:  # again, now that the batch's tables exist
                self._check_truncate(name)
            dead = self._prepare_dead_letter(runtime, df.schema) if found.dead else None
            rows = self._after_truncates(df, found)
            results = self._write(rows, plans, runtime, batch_id, dead) if plans or dead else {}
        finally:
            df.unpersist()
        for name in found.truncated:  # emptied when committed, with the changes after it
            results[name] = replace(results.get(name, WriteResult()), truncate=True)
        runtime.driver.drain()  # the route log is the commit's too (pipelined)
        if results:  # before any table records it: the loss check reads it per table
            runtime.routes.record(batch_id, results)
        runtime.driver.record(batch_id, results)
        return WriteResult.merge(results.values())

    def discover(self, df: DataFrame) -> BatchTables:
        from pyspark.sql import functions as F

        col = self.table_column
        if col not in df.columns:
            raise SchemaMismatchError(
                f"sink {self.options.sink_id}: the routing column {col!r} is missing from the "
                f"DataFrame (columns: {df.columns})"
            )
        data = list(self._data_columns(df.schema))
        aggs = [F.count(distribution.column(c)).alias(f"n{i}") for i, c in enumerate(data)]
        if KEY_FIELDS_COLUMN in df.columns:
            aggs.append(F.first(F.col(KEY_FIELDS_COLUMN), ignorenulls=True).alias("key"))
        kind = self._truncating_kind(df)
        if kind is not None:
            aggs.append(truncation.truncate_aggregate(kind, self.options.order_by).alias("trunc"))
            changes = ~F.col(kind).eqNullSafe(F.lit(truncation.TRUNCATE))
            aggs.append(F.count(F.when(changes, F.lit(1))).alias("changes"))
        columns: dict[str, frozenset[str]] = {}
        keys: dict[str, tuple[str, ...]] = {}
        truncated: dict[str, Any] = {}
        dead: list[Any] = []
        for row in df.groupBy(distribution.column(col).alias("t")).agg(*aggs).collect():
            name = row["t"]
            at = row["trunc"] if kind is not None else None
            only_truncates = at is not None and not row["changes"]
            outside = self._outside_problem(name)
            if outside is None and only_truncates and self._skips_truncate(name):
                continue  # only truncates, of no table there is: nothing to empty
            problem = outside or self._missing_problem(name)
            if problem is not None:
                if self.dead_letter is None:
                    raise ValidationError(problem)
                if only_truncates:  # nothing to keep aside: the truncate is not applied
                    log.warning("%s; its TRUNCATE is not applied", problem)
                else:
                    dead.append(name)
                continue
            if at is not None:
                self._check_truncate(name)
            columns[name] = frozenset(c for i, c in enumerate(data) if row[f"n{i}"])
            if "key" in row.asDict() and row["key"]:
                keys[name] = tuple(row["key"])
            if at is not None:
                truncated[name] = at
        return BatchTables(columns, keys, tuple(dead), truncated)

    def _truncating_kind(self, df: DataFrame) -> str | None:
        """The row kind column when the batch may hold TRUNCATE rows (CDC modes)."""
        kind = self.options.row_kind_column
        return kind if self.options.is_cdc and kind and kind in df.columns else None

    def _skips_truncate(self, name: Any) -> bool:
        """A table the sink has not written and the catalog lacks: a truncate of it alone
        has nothing to empty, and nothing to create the table from."""
        known = self.runtime is not None and name in self.runtime.tables
        return not known and not self.catalog.table_exists(str(name))

    def _after_truncates(self, df: DataFrame, found: BatchTables) -> DataFrame:
        """The rows to write: without TRUNCATE rows, and for each truncated table only the
        changes after its last truncate (:mod:`stream_sink.spark.cdc.truncation`)."""
        kind = self._truncating_kind(df)
        if kind is None:
            return df
        pos_type = df.select(truncation.position(self.options.order_by)).schema[0].dataType
        at = {n: truncation.literal(v, pos_type) for n, v in found.truncated.items()}
        return truncation.after(df, kind, self.options.order_by, at, self.table_column)

    def _data_columns(self, schema: StructType) -> tuple[str, ...]:
        """The user's columns: all but the routing, row kind and ``from_debezium``'s
        columns (:mod:`stream_sink.spark.cdc.control_columns`); order columns are data."""
        return data_columns(
            schema, row_kind_column=self.options.row_kind_column, table_column=self.table_column
        )

    def _cdc_columns(self, schema: StructType) -> set[str]:
        """The row kind and order columns of ``schema`` a CDC plan reads."""
        opts = self.options
        named = {c for c in (opts.row_kind_column, *opts.order_by) if c}
        return named & set(schema.fieldNames())

    def _where(self, name: Any) -> str:
        column = self.table_column
        return f"sink {self.options.sink_id}: routing value {name!r} in column {column!r}"

    def _outside_problem(self, name: Any) -> str | None:
        """Why rows routed by ``name`` may not be written wherever the table stands (a
        null, a name no catalog should take, a table outside the sink's scope)."""
        hint = "; or pass dead_letter_table= to keep such rows aside"
        if name is None:
            return f"{self._where(name)} is not a table name such as 'db.table'{hint}"
        problem = self.scope.problem(str(name))
        return None if problem is None else f"{self._where(name)} {problem}{hint}"

    def _missing_problem(self, name: str) -> str | None:
        """Why rows routed by ``name`` cannot be written: the table is missing and the
        sink does not create tables (None: they can)."""
        known = self.runtime is not None and name in self.runtime.tables
        if not known and not self.create_tables and not self.catalog.table_exists(name):
            return (
                f"{self._where(name)} names no table of catalog {self.catalog.name!r}; "
                "create it, or pass create_tables=True; or pass dead_letter_table= to "
                "keep such rows aside"
            )
        return None

    def _check_truncate(self, name: str) -> None:
        """Refuse a TRUNCATE of a table the sink does not own (see :mod:`.route_scope`);
        a table that does not exist yet is one this batch creates: checked again once
        it does (another writer may have created it first)."""
        known = self.runtime is not None and name in self.runtime.tables
        created = name in self.registry.created() or (
            not known and not self.catalog.table_exists(name)
        )
        refusal = self.scope.truncate_refusal(name, created)
        if refusal is not None:
            raise ValidationError(f"sink {self.options.sink_id}: {refusal}")

    def _prepare_table(
        self, runtime: RoutedRuntime, name: str, spark_schema: StructType, found: BatchTables
    ) -> BatchPlan:
        """The table ``name`` (opened, created and registered as needed), its schema
        brought up to the batch when evolution is on, and its write plan."""
        sink = runtime.tables.get(name) or self._open_table(runtime, name, spark_schema, found)
        table, opts = sink.table, sink.options
        table.refresh()
        wanted = found.columns[name] | self._cdc_columns(spark_schema)
        sub = _sub_schema(spark_schema, wanted)
        evolve_for_batch(sub, table, opts)
        # as for one table: an order column the table lacks is read, not written
        optional = set(self.options.order_by)
        missing = sorted(
            c for c in found.columns[name] - optional if not table.schema().has_field(c)
        )
        if missing:
            raise SchemaMismatchError(
                f"sink {self.options.sink_id}: rows for table {name} carry values in columns "
                f"{missing} that the table does not have{HINT_NONE}"
            )
        present = {c for c in spark_schema.fieldNames() if table.schema().has_field(c)}
        keep = _sub_schema(spark_schema, present | self._cdc_columns(spark_schema))
        return plan_batch(keep, table, opts)

    def _open_table(
        self, runtime: RoutedRuntime, name: str, spark_schema: StructType, found: BatchTables
    ) -> _TableSink:
        if not self.catalog.table_exists(name) and self._create(name, spark_schema, found):
            self.registry.add_created(name)
        self.registry.add(name)
        sink = self._open_committer(runtime, name)
        runtime.tables[name] = sink
        return sink

    def _create(self, name: str, spark_schema: StructType, found: BatchTables) -> bool:
        """Create table ``name``; False when another writer created it first."""
        from stream_sink.table.arrow import schema_from_arrow

        declared = self.template.schemas.get(name)
        if declared is not None:
            arrow = declared if isinstance(declared, pa.Schema) else _ddl_to_arrow(declared)
        else:
            data = schema_check.spark_to_arrow(spark_schema, name)
            arrow = pa.schema([f for f in data if f.name in found.columns[name]])
        keys = self.template.keys_for(name, found.keys.get(name, ()))
        schema = schema_from_arrow(arrow, list(keys) or None)
        spec = [p for p in self.template.partition_spec if schema.has_field(p[1])]
        namespace = table_identifier(name)[:-1]
        if not self.catalog.namespace_exists(namespace):
            with contextlib.suppress(AlreadyExistsError):
                self.catalog.create_namespace(namespace)
        try:
            self.catalog.create_table(
                name,
                schema,
                spec or None,
                properties={**STREAMING_METADATA_PROPERTIES, **self.template.properties},
            )
            log.info("sink %s: created table %s (key %s)", self.options.sink_id, name, keys)
            return True
        except AlreadyExistsError:
            return False

    def _prepare_dead_letter(
        self, runtime: RoutedRuntime, spark_schema: StructType
    ) -> tuple[str, ...]:
        """The dead-letter table (created with every column of the DataFrame, all optional,
        or given the columns it lacks); the columns its rows keep."""
        from stream_sink.table.arrow import schema_from_arrow

        name = self.dead_letter
        assert name is not None
        data = schema_check.spark_to_arrow(spark_schema, name)
        arrow = pa.schema([f.with_nullable(True) for f in data])
        if not self.catalog.table_exists(name):
            namespace = table_identifier(name)[:-1]
            if not self.catalog.namespace_exists(namespace):
                with contextlib.suppress(AlreadyExistsError):
                    self.catalog.create_namespace(namespace)
            with contextlib.suppress(AlreadyExistsError):
                self.catalog.create_table(
                    name, schema_from_arrow(arrow), properties=STREAMING_METADATA_PROPERTIES
                )
        if name not in runtime.tables:
            self.registry.add(name)
            runtime.tables[name] = self._open_committer(runtime, name)
        table = runtime.tables[name].table
        table.refresh()
        with table.update_schema() as update:
            update.union_by_name(arrow)
        return tuple(arrow.names)

    def _write(
        self,
        df: DataFrame,
        plans: Mapping[str, BatchPlan],
        runtime: RoutedRuntime,
        batch_id: int,
        dead: tuple[str, ...] | None = None,
    ) -> dict[str, WriteResult]:
        opts = self.options
        op = f"{runtime.job_id[:8]}-{batch_id}-{uuid.uuid4().hex[:8]}"
        factories = {
            name: TaskWriterFactory.for_table(
                runtime.tables[name].table,
                equality_fields=p.equality_fields,
                upsert=opts.mode == "upsert",
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
                runtime.tables[self.dead_letter].table, operation_id=op
            )
            columns[self.dead_letter] = dead
        task = RoutedWriteTask(
            self.table_column,
            factories,
            columns,
            insert_kind,
            frozenset(plans),
            self.dead_letter if dead else None,
        )
        spread = df
        if opts.is_cdc:
            keys = sorted({k for p in plans.values() for k in p.equality_fields})
            spread = distribution.distribute_cdc(df, [self.table_column, *keys], opts.order_by)
        try:
            rows = spread.mapInArrow(task, ROUTED_DDL).collect()
        except Exception as e:
            reraise_stream_sink_error(e)
            raise
        parts: dict[str, list[WriteResult]] = {}
        for r in rows:
            parts.setdefault(r["table"], []).append(WriteResult.from_bytes(bytes(r["result"])))
        return {name: WriteResult.merge(rs) for name, rs in parts.items()}

    # --- committers ------------------------------------------------------------------------

    def open(self) -> RoutedRuntime:
        opts = self.options
        spark_io = self.catalog.io_for(opts.spark_checkpoint_location)
        job_id = query.read_query_id(opts.spark_checkpoint_location, spark_io)
        if self.runtime is not None and self.runtime.job_id == job_id:
            return self.runtime
        self.abandon()
        config = CheckpointConfig(opts.checkpoint_interval_batches, opts.checkpoint_interval_ms)
        routes = RouteLog(
            self.catalog.io_for(opts.checkpoint_location),
            f"{opts.checkpoint_location}/{opts.sink_id}.routes.json",
            job_id,
        )
        acknowledged = query.acknowledged_batch_ids(opts.spark_checkpoint_location, spark_io)
        driver: CommitDriver[Table] = CommitDriver(
            CheckpointCoordinator(config),
            schedule=schedule_for(opts.commit_mode),
            after_checkpoint=self._committed,
        )
        runtime = RoutedRuntime(job_id, {}, driver, routes, acknowledged)
        try:
            for name in self.registry.load():
                runtime.tables[name] = self._open_committer(runtime, name)
        except BaseException:
            runtime.close()
            raise
        self.runtime = runtime
        self._opened = True
        return runtime

    def _open_committer(self, runtime: RoutedRuntime, name: str) -> _TableSink:
        """The committer of table ``name``, restored; the acknowledged batches the route
        log records for the table must be accounted for (``loss_check``)."""
        runtime.driver.drain()  # the route log is the commit's too (pipelined)
        opts = self.options
        table = self.catalog.load_table(name)
        committer = iceberg_committer(
            self.catalog, table, opts, operator_id=f"{opts.sink_id}={name}", job_id=runtime.job_id
        )
        acknowledged = runtime.routes.acknowledged_for(name, runtime.acknowledged)
        location = self.options.spark_checkpoint_location
        reader = input_reader(location, self.catalog.io_for(location))
        runtime.driver.open(name, committer, acknowledged, reader)
        if self.maintenance is not None:
            self.maintenance.open_table(name, committer.uncommitted_paths)
        return _TableSink(table, replace(opts, table=name, table_column=None))

    def _committed(self, committed: Mapping[str, Table]) -> None:
        """After each checkpoint's commits (on the commit's thread when pipelined): the
        route log forgets what every table's watermark covers; the committed tables are
        offered to their maintenance with the metadata the commits left."""
        runtime = self.runtime
        if runtime is None:
            return
        runtime.routes.drop_committed(runtime.driver.watermarks())
        if self.maintenance is not None and committed:
            self.maintenance.after_checkpoint(
                {name: table.metadata for name, table in committed.items()}
            )

    def end_input(self) -> None:
        """Commit what every table holds; opens the tables first when no batch of this
        run did but an earlier run left state (``runtime.left_state``)."""
        opts = self.options
        spark = opts.spark_checkpoint_location
        if (
            self.runtime is None
            and not self._opened
            and self.registry.load()
            and left_state(opts.state_dir, spark, self.catalog.io_for(spark))
        ):
            self.open()
        if self.runtime is not None:
            self.runtime.driver.end_input()

    def _spark_io(self) -> FileIO:
        return self.catalog.io_for(self.options.spark_checkpoint_location)

    def end_run_gaps(self) -> None:
        """At a graceful close: batches Spark acknowledged after the last one this run
        handed over (:meth:`BatchGaps.run_ended`)."""
        runtime = self.runtime
        self.gaps.run_ended(runtime.driver if runtime else None, self._spark_io())

    def run_ended(self) -> None:
        """The query's run ended (the sink closed): a next run that ends before its first
        batch opens the tables again in ``end_input``."""
        self._opened = False

    def abandon(self) -> None:
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            try:
                runtime.close()
            except Exception as e:  # closing must not hide the original error
                log.warning("sink %s: closing operator state failed: %s", self.options.sink_id, e)


def _sub_schema(schema: StructType, names: set[str] | frozenset[str]) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name in names])


def _ddl_to_arrow(ddl: str) -> pa.Schema:
    from stream_sink.spark.cdc.debezium import to_spark_schema

    return schema_check.spark_to_arrow(to_spark_schema(ddl), "table_template")
