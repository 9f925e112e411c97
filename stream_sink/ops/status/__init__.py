"""Where a running (or stopped) sink is: read from its checkpoint location and table.

Sources, all read-only (safe while the query runs):
- ``<checkpoint location>/spark/``: Spark's query id (``metadata``), the batches it
  planned (``offsets/``) and the batches whose ``foreachBatch`` returned (``commits/``);
  for a ``format("stream_sink")`` query, whose sink checkpoints under Spark's own
  ``checkpointLocation``, Spark's checkpoint is the checkpoint location itself.
- ``<checkpoint location>/<sink id>/chk-<id>``: the sink's completed checkpoints.
- the table's snapshot summaries: the watermark, the highest batch id committed by
  (query id, sink id) on the branch; a Delta table's ``txn`` of the sink's appId, its
  version and live files (:mod:`.delta`).
- ``<checkpoint location>/<sink id>/maintenance.json``: what the in-sink maintenance
  last reported, an Iceberg sink's counts or a Delta sink's (told apart by its fields).
- ``<checkpoint location>/<sink id>/transactions.json``: the source transactions a sink
  with ``transactions="debezium"`` held after its last batch (a routed table's status,
  ``<sink id>=<table>``, shows its sink's).

The table is the one the sink recorded at its first start (``<sink id>/_table.json`` and
every checkpoint's ``_metadata``: catalog name and settings, table name, table uuid; a
Delta sink its table's location and ``metaData`` id), unless ``table`` is given; the
catalog is the one given, else the recorded one. A sink that recorded nothing (older
versions) has its table reported unknown, with what to pass.

Invariants: a batch Spark acknowledged (in ``commits/``) above the watermark is durable in
the sink's state but not yet in the table: *staged* when a completed checkpoint covers
it (committed at the next commit attempt), else *pending* (waiting for its checkpoint).
Batches planned but not acknowledged are in flight: Spark runs them (again) next. When
the table cannot be read (or is not the recorded one, by uuid) the watermark is unknown
and so are ``staged`` and ``pending`` (None): nothing is reported as uncommitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from stream_sink.catalogs import load_catalog
from stream_sink.checkpoints import CheckpointStorage, CompletedCheckpoint, TableIdentity
from stream_sink.checkpoints.metadata import DELTA_CATALOG
from stream_sink.commit.delta.target import delta_identity as delta_identity_of
from stream_sink.commit.iceberg.source_position import sink_position
from stream_sink.commit.iceberg.watermark import committed_watermark, last_stamped
from stream_sink.commit.source_position import SourcePosition
from stream_sink.delta import DeltaTable
from stream_sink.delta.maintenance import DeltaMaintenanceMetrics, metrics_from_report
from stream_sink.exceptions import (
    CheckpointError,
    InvalidOptionError,
    NotFoundError,
    SinkIOError,
    StreamSinkError,
    ValidationError,
)
from stream_sink.io import FileIO
from stream_sink.maintenance.metadata_files import metadata_files_warning
from stream_sink.metrics.maintenance_report import metrics_of, read_report_doc, report_location
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot
from stream_sink.metrics.transactions import (
    TransactionMetricsSnapshot,
    hold_report_location,
    read_hold_report,
)
from stream_sink.ops.status.delta import DeltaTableState, LastCommit, delta_watermark
from stream_sink.secrets import masked, scrub, without_passwords
from stream_sink.spark import query
from stream_sink.spark.options import SPARK_CHECKPOINT_DIR, resolve_location
from stream_sink.table.catalog import Catalog
from stream_sink.table.operations import branch_head
from stream_sink.table.snapshots import MAIN_BRANCH


@dataclass(frozen=True)
class SinkStatus:
    """One sink's progress; ``watermark``, ``staged`` and ``pending`` are None when its
    table could not be read (``table_error`` says why)."""

    checkpoint_location: str
    sink_id: str
    table: str
    query_id: str
    watermark: int | None
    table_error: str | None
    last_commit: LastCommit | None
    last_checkpoint_id: int | None
    acknowledged: tuple[int, ...]
    planned: tuple[int, ...]
    staged: tuple[int, ...] | None
    pending: tuple[int, ...] | None
    catalog: str | None = None
    """The catalog read: its name and where it is (never credentials); for a Delta
    table, that it has none."""
    maintenance: MaintenanceMetricsSnapshot | DeltaMaintenanceMetrics | None = None
    """What the sink's in-job maintenance last reported (None: it runs none, or not yet),
    in the counts of the sink's table format."""
    warnings: tuple[str, ...] = ()
    """What needs attention: maintenance failing run after run, a table keeping every
    old metadata file."""
    delta: DeltaTableState | None = None
    """A Delta sink's table now (version, live files); None for an Iceberg sink, or
    when the table could not be read."""
    position: SourcePosition | None = None
    """The source position the sink's last commit recorded in the table (None: none,
    or the table could not be read)."""
    transactions: TransactionMetricsSnapshot | None = None
    """What a sink holding source transactions held after its last batch (None: it
    holds none)."""

    @property
    def offsets_ahead(self) -> int | None:
        """How many batches Spark's offset log is ahead of the watermark."""
        if self.watermark is None or not self.planned:
            return None
        return max(0, self.planned[-1] - self.watermark)

    @property
    def in_flight(self) -> tuple[int, ...]:
        done = set(self.acknowledged)
        return tuple(
            b
            for b in self.planned
            if b not in done and (self.watermark is None or b > self.watermark)
        )


def sink_status(
    checkpoint_location: str,
    catalog: Catalog | None,
    *,
    sink_id: str | None = None,
    table: str | None = None,
    branch: str = MAIN_BRANCH,
    storage_options: Mapping[str, str] | None = None,
) -> SinkStatus:
    """The status of the sink checkpointing under ``checkpoint_location``: of ``table``
    in ``catalog``, by default the table the sink recorded in the catalog it recorded
    (:func:`recorded_table`, :func:`open_recorded_catalog`). A Delta sink's table is
    the one it recorded (:mod:`.delta`; ``table`` a Delta table's path instead,
    ``storage_options`` its store's credentials)."""
    root = resolve_location(checkpoint_location)
    # the catalog's storage properties (s3.endpoint, keys) serve its checkpoints too
    if catalog is not None:
        io = catalog.io_for(root)
    else:
        io = FileIO.for_location(root, storage_options)
    spark_dir = _spark_dir(root, io)
    if not io.exists(root):
        raise NotFoundError(
            f"checkpoint location {root!r} does not exist; check "
            "--checkpoint-location (IcebergSink's checkpoint_location)"
        )
    try:
        query_id = query.read_query_id(spark_dir, io)
    except CheckpointError:
        raise CheckpointError(
            f"no streaming query has checkpointed at {spark_dir}: is "
            f"{root!r} a sink's checkpoint_location?"
        ) from None
    sink = sink_id or _only_sink(root, io)
    storage = CheckpointStorage(root, sink, io)
    checkpoints = storage.list_completed()
    recorded = _recorded(storage, checkpoints)
    maintenance = maintenance_report(io, report_location(root, sink))
    delta_identity = _delta_table(recorded, table, storage_options)
    open_error, delta = None, None
    warnings: tuple[str, ...] = ()
    if delta_identity is not None:
        catalog = None
        table_name = delta_identity.table
        found = delta_watermark(delta_identity, query_id, sink, storage_options)
        watermark, error, delta = found.watermark, found.error, found.table
        last, position = found.last_commit, found.position
    else:
        if catalog is None and recorded is not None:
            catalog, open_error = _open_or_error(recorded, storage_options)
        table_name = table or (recorded.table if recorded is not None else sink)
        watermark, error, last, warnings, position = _table_watermark(
            catalog, table_name, recorded, query_id, sink, branch
        )
        if recorded is None and table is None and error is not None:
            error = f"{_unrecorded(maintenance)}; as table {table_name}: {error}"
    if isinstance(maintenance, MaintenanceMetricsSnapshot) and maintenance.failing:
        warnings = (
            f"in-sink maintenance has failed {maintenance.consecutive_failures} runs in a "
            f"row (retried as commits go on): {maintenance.last_error}",
            *warnings,
        )
    acknowledged = tuple(query.acknowledged_batch_ids(spark_dir, io))
    staged, pending = _uncommitted(watermark, acknowledged, checkpoints)
    return SinkStatus(
        checkpoint_location=root,
        sink_id=sink,
        table=table_name,
        query_id=query_id,
        watermark=watermark,
        table_error=open_error or error,
        last_commit=last,
        last_checkpoint_id=checkpoints[-1].checkpoint_id if checkpoints else None,
        acknowledged=acknowledged,
        planned=tuple(query.planned_batch_ids(spark_dir, io)),
        staged=staged,
        pending=pending,
        catalog=_describe(catalog, delta_identity),
        maintenance=maintenance,
        warnings=warnings,
        delta=delta,
        position=position,
        transactions=read_hold_report(io, hold_report_location(root, sink.split("=")[0])),
    )


def _describe(catalog: Catalog | None, delta: TableIdentity | None) -> str | None:
    if delta is not None:
        return "none (a Delta table, by its location)"
    return None if catalog is None else describe_catalog(catalog)


def _delta_table(
    recorded: TableIdentity | None, table: str | None, storage: Mapping[str, str] | None
) -> TableIdentity | None:
    """The Delta table to read: ``table`` when it is a Delta table's path (the id it has
    now stands for the recorded one when the sink recorded none or another kind), else
    the recorded one when it is a Delta table; None: an Iceberg table."""
    if table is not None:
        location = resolve_location(table)
        if not DeltaTable.is_delta_table(location, storage):
            return None
        if recorded is not None and recorded.is_delta:
            return replace(
                recorded,
                table=location,
                catalog_settings={**(recorded.catalog_settings or {}), "location": location},
            )
        try:
            return delta_identity_of(DeltaTable.load(location, storage_options=storage))
        except (StreamSinkError, OSError):  # reported by delta_watermark, which loads it too
            settings = {"type": DELTA_CATALOG, "location": location}
            return TableIdentity(DELTA_CATALOG, location, "unknown", settings)
    return recorded if recorded is not None and recorded.is_delta else None


def _unrecorded(maintenance: object) -> str:
    """Why the table is unknown when the sink recorded none, and what to pass."""
    what = "a Delta sink" if isinstance(maintenance, DeltaMaintenanceMetrics) else "the sink"
    return (
        f"table unknown: {what} recorded no table in this checkpoint location (written by "
        "an older version; it is recorded at the next start): pass --table (a Delta "
        "table's path, or an Iceberg table's name with --warehouse or --catalog-uri)"
    )


def maintenance_report(
    io: FileIO, location: str
) -> MaintenanceMetricsSnapshot | DeltaMaintenanceMetrics | None:
    """The in-sink maintenance report at ``location``, in the counts of the sink that
    wrote it: a Delta sink's (files compacted and vacuumed) or an Iceberg sink's; None
    when there is none or it cannot be read."""
    doc = read_report_doc(io, location)
    if doc is None:
        return None
    delta = metrics_from_report(doc)
    return delta if delta is not None else metrics_of(doc, location)


def recorded_table(checkpoint_location: str, sink_id: str | None = None) -> TableIdentity | None:
    """The table the sink checkpointing under ``checkpoint_location`` recorded (None:
    none recorded, a checkpoint location of an older version or not yet started)."""
    root = resolve_location(checkpoint_location)
    io = FileIO.for_location(root)
    if not io.exists(root):
        return None
    storage = CheckpointStorage(root, sink_id or _only_sink(root, io), io)
    return _recorded(storage, storage.list_completed())


def open_recorded_catalog(
    identity: TableIdentity, properties: Mapping[str, str] | None = None
) -> Catalog:
    """The catalog ``identity`` recorded, opened read-only, with ``properties`` (the
    credentials the record leaves out: ``--catalog-property``) over the recorded
    settings: NotFoundError when its settings were not recorded or its warehouse is
    gone (nothing is created)."""
    settings: dict[str, Any] = {**(identity.catalog_settings or {}), **(properties or {})}
    kind = settings.pop("type", None)
    if kind is None:
        raise NotFoundError(
            f"the sink recorded {identity.describe()} but not how to open its catalog "
            "(a checkpoint of an older version); pass --warehouse or --catalog-uri"
        )
    warehouse = settings.pop("warehouse", None)
    uri = settings.pop("uri", None)
    if kind == "hadoop" and not (warehouse and FileIO.for_location(warehouse).exists(warehouse)):
        raise NotFoundError(
            f"the warehouse {warehouse!r} of catalog {identity.catalog!r}, which holds "
            f"{identity.table}, does not exist any more; pass --warehouse if it moved"
        )
    return load_catalog(identity.catalog, type=kind, warehouse=warehouse, uri=uri, **settings)


def describe_catalog(catalog: Catalog) -> str:
    """``name (where)``: the warehouse or database URI, a password never shown."""
    props = catalog.properties
    where = props.get("uri") or props.get("warehouse") or "?"
    return f"{catalog.name} ({without_passwords(where)})"


def _recorded(
    storage: CheckpointStorage, checkpoints: list[CompletedCheckpoint]
) -> TableIdentity | None:
    """The recorded table, with the catalog settings of the newest record that has them
    (``_table.json`` is written once; checkpoints of a newer version add settings)."""
    first = storage.recorded_table()
    records = [first] + [c.metadata.table for c in reversed(checkpoints)]
    found = [r for r in records if r is not None]
    if not found:
        return None
    with_settings = [r for r in found if r.catalog_settings and r.same_table(found[0])]
    return with_settings[0] if with_settings else found[0]


def _open_or_error(
    identity: TableIdentity, properties: Mapping[str, str] | None
) -> tuple[Catalog | None, str | None]:
    """The recorded catalog, or why it cannot be opened (a database that is down or
    wants the password the record leaves out fails here too: reported, with the fix).
    No secret is in the reason: the settings are shown masked."""
    try:
        return open_recorded_catalog(identity, properties), None
    except StreamSinkError as e:
        return None, scrub(str(e), properties or {})
    except Exception as e:  # the SQL catalog's driver: connection refused, bad password
        where = describe_settings(identity.catalog_settings or {})
        said = scrub(str(e).splitlines()[0] if str(e) else "", properties or {})
        return None, (
            f"cannot open catalog {identity.catalog!r} as the sink recorded it ({where}): "
            f"{type(e).__name__}: {said}; pass --catalog-uri (with the password it needs) or "
            "--warehouse, or the credentials it needs (--catalog-property, "
            "--catalog-properties-file, --catalog-property-env)"
        )


def describe_settings(settings: Mapping[str, str]) -> str:
    """``k=v, ...`` as they may be shown (secrets masked, passwords removed)."""
    return ", ".join(f"{k}={v}" for k, v in sorted(masked(settings).items()))


def _uncommitted(
    watermark: int | None,
    acknowledged: tuple[int, ...],
    checkpoints: list[CompletedCheckpoint],
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(staged, pending) above ``watermark``; (None, None) when it is unknown."""
    if watermark is None:
        return None, None
    covered = {
        b
        for c in checkpoints
        if c.checkpoint_id > watermark
        for b in range(c.metadata.first_batch_id, c.checkpoint_id + 1)
    }
    unseen = [b for b in acknowledged if b > watermark]
    return (
        tuple(b for b in unseen if b in covered),
        tuple(b for b in unseen if b not in covered),
    )


def _spark_dir(root: str, io: FileIO) -> str:
    """Spark's checkpoint of the sink's query: ``<root>/spark`` (``foreachBatch`` sinks),
    or ``root`` itself when Spark's checkpoint is there and not below (the Data Source
    route: its sink checkpoints under Spark's ``checkpointLocation``)."""
    nested = f"{root}/{SPARK_CHECKPOINT_DIR}"
    if not io.exists(f"{nested}/metadata") and io.exists(f"{root}/metadata"):
        return root
    return nested


SPARK_ENTRIES = frozenset({"metadata", "offsets", "commits", "sources", "state", "touched-keys"})
"""Entries of a checkpoint location that is also Spark's (``_spark_dir``) that are not
a sink's: Spark's own, and the Delta route's spilled keys."""


def _only_sink(root: str, io: FileIO) -> str:
    """The one sink id checkpointing under ``root`` (its sub-directory other than
    Spark's); InvalidOptionError when there are several, NotFoundError when none."""
    names = [loc.rstrip("/").rsplit("/", 1)[-1] for loc in io.list_dir(root)]
    spark = SPARK_ENTRIES if _spark_dir(root, io) == root else frozenset()
    sinks = [
        n for n in names if n != SPARK_CHECKPOINT_DIR and n not in spark and not n.startswith(".")
    ]
    if len(sinks) == 1:
        return sinks[0]
    if not sinks:
        raise NotFoundError(
            f"no sink has completed a checkpoint under {root!r} yet; pass "
            "--sink-id (default: the table name) to read its table anyway"
        )
    raise InvalidOptionError(
        f"several sinks checkpoint under {root!r}: {', '.join(sinks)}; pass --sink-id"
    )


def _table_watermark(
    catalog: Catalog | None,
    table: str,
    recorded: TableIdentity | None,
    query_id: str,
    sink: str,
    branch: str,
) -> tuple[int | None, str | None, LastCommit | None, tuple[str, ...], SourcePosition | None]:
    if catalog is None:
        return (
            None,
            "no catalog given and none recorded (pass --warehouse or --catalog-uri)",
            None,
            (),
            None,
        )
    try:
        loaded = catalog.load_table(table)
    except (NotFoundError, ValidationError, SinkIOError) as e:
        return None, f"{e} (pass --table, --warehouse or --catalog-uri)", None, (), None
    meta = loaded.metadata
    if recorded is not None and meta.table_uuid != recorded.table_uuid:
        return (
            None,
            f"table {table} in catalog {catalog.name!r} is not the table this sink wrote: "
            f"it has uuid {meta.table_uuid}, the sink recorded {recorded.describe()} (was "
            "it dropped and created again? pass --table/--warehouse of the sink's table)",
            None,
            (),
            None,
        )
    mark = committed_watermark(meta, query_id, sink, branch)
    warning = metadata_files_warning(loaded)
    warnings = (f"table {table}: {warning}",) if warning else ()
    stamped = last_stamped(meta, branch_head(meta, branch), query_id, sink)
    position = sink_position(meta, sink, branch)
    if stamped is None:
        return mark, None, None, warnings, position
    snap, stamp = stamped
    last = LastCommit(snap.snapshot_id, snap.timestamp_ms, stamp)
    return mark, None, last, warnings, position
