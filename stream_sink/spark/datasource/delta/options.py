"""Options of ``format("stream_sink")`` with ``.option("target", "delta")``: a Delta table.

The target is chosen by the ``target`` option: ``iceberg`` (the default: a catalog
table named by ``table``) or ``delta`` (a Delta table at ``path``, created from the
DataFrame's schema when missing). Keys are normalized as for Iceberg (``-`` for
``_``, lower case); lists are comma-separated.

=============================  ======================================================
option                         meaning (default)
=============================  ======================================================
``target``                     ``delta`` (required for Delta; ``iceberg`` otherwise)
``path``                       the Delta table's location (or ``.save(path)``,
                               ``.start(path)``; required)
``mode``                       ``append`` | ``overwrite`` | ``upsert`` | ``changelog``
                               (``append``); batch writes: ``append`` | ``overwrite``
``partition-by``               partition columns of a table the sink creates
``equality-fields``            key columns (required in CDC modes)
``row-kind-column``            column of ``+I/-U/+U/-D`` (changelog; optional in upsert)
``order-by``                   column(s) giving source order (required in CDC modes)
``sink-id``                    stable name of the sink (the path's last part)
``state-dir``                  operator state directory on the driver (``state``)
``checkpoint-location``        the sink's completed checkpoints (Spark's
                               ``checkpointLocation``)
``checkpoint-interval-batches`` ``1`` only: every micro-batch commits
``commit-mode``                ``synchronous`` only (``pipelined`` is refused, as for
                               an Iceberg target)
``resume-from-table``          ``<job id>:<batch id>``: continue the query that
                               recorded this position in the table (a new checkpoint)
``event-time-column``          a timestamp, date or long column: each commit records
                               its low and high value over the commit's data files
``driver-key-limit``           CDC: distinct keys of a batch the commit holds at once
                               (``1000000``); beyond, it streams the tasks' spilled keys
``maintenance``                ``true``: compaction and vacuum after the commits, as
                               ``DeltaSink(maintenance=DeltaMaintenanceOptions())``
                               (``false``; streams only)
``maintenance.<field>``        a field of :class:`~stream_sink.delta.DeltaMaintenanceOptions`
                               with ``-`` for ``_`` (``maintenance.every-versions``);
                               setting one turns maintenance on
``checkpointLocation``         Spark's checkpoint location (required for streams)
``configuration.<key>``        Delta table configuration of a table the sink creates,
                               as ``DeltaSink(configuration=...)``; the key keeps its
                               case (``configuration.delta.appendOnly``)
``s3.<key>``                   FileIO property of the table's store (``s3.endpoint``,
                               ``s3.access-key-id``, ``s3.secret-access-key``,
                               ``s3.region``), for a ``path`` on ``s3://``
=============================  ======================================================

Invariants: every check that needs no table runs here, so a bad option fails before
the query starts; Iceberg-only options (``table``, ``branch``, ``catalog.*``,
``snapshot-property.*``) and options without meaning on this route are refused with
what to do instead; locations are made absolute on the driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stream_sink.commit.source_position import ResumePoint
from stream_sink.delta.maintenance import DeltaMaintenanceOptions
from stream_sink.exceptions import InvalidOptionError
from stream_sink.spark.datasource.keys import (
    MAINTENANCE,
    MAINTENANCE_PREFIX,
    SHARED_OPTIONS,
    after_prefix,
    check_interval_batches,
    not_on_this_route,
    parse_maintenance,
    require_spark_checkpoint,
    sort_options,
    split_list,
)
from stream_sink.spark.options import (
    CDC_MODES,
    ROUTE_OPTION_NAMES,
    parse_delta_sink_options,
    resolve_location,
    resume_point,
    route_commit_mode,
)

TARGET = "target"
TARGETS = ("iceberg", "delta")
WHERE = "format('stream_sink') with target 'delta'"
DELTA_OPTIONS = ("path", *SHARED_OPTIONS, "partition-by", "driver-key-limit")
ICEBERG_ONLY = {
    "table": "it names an Iceberg table; a Delta table is named by its path: "
    ".option('path', DIR) or .save(DIR) / .start(DIR)",
    "branch": "Delta tables have no branches",
    "catalog.": "a Delta table needs no catalog: give its path",
    "snapshot-property.": "Delta versions carry no snapshot summary",
    "deletes": "into Delta, positions are DeltaSink(deletes='positions') of foreachBatch: "
    "this route commits each batch in a new Python worker, which would rebuild the index "
    "of the table's keys at every commit",
}
LIST_OPTIONS = ("partition-by", "equality-fields", "order-by")
CONFIGURATION_PREFIX = "configuration."
"""Delta table configuration of a table the sink creates (``DeltaSink(configuration=...)``)."""
STORAGE_PREFIX = "s3."
"""Options passed to the table's FileIO (``DeltaSink(storage_options=...)``)."""


@dataclass(frozen=True)
class DeltaRouteOptions:
    """Parsed options of a Delta target: ``DeltaSink``'s keyword arguments."""

    path: str
    mode: str = "append"
    partition_by: tuple[str, ...] = ()
    equality_fields: tuple[str, ...] = ()
    row_kind_column: str | None = None
    order_by: tuple[str, ...] = ()
    sink_id: str | None = None
    checkpoint_location: str | None = None
    spark_checkpoint_location: str | None = None
    state_dir: str = "state"
    driver_key_limit: int | None = None
    """None: DeltaSink's default."""
    storage_options: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """FileIO properties of the table's store (``s3.*``)."""
    maintenance: DeltaMaintenanceOptions | None = None
    """In-sink compaction and vacuum after the stream's commits (None: none)."""
    configuration: tuple[tuple[str, str], ...] = ()
    """Delta table configuration of a table the sink creates (``configuration.*``)."""
    resume_from_table: ResumePoint | None = None
    """The recorded position a new query continues from (``resume-from-table``)."""
    event_time_column: str | None = None
    """The column whose low and high value each commit records (``event-time-column``)."""

    @property
    def storage(self) -> dict[str, str]:
        return dict(self.storage_options)

    @property
    def is_cdc(self) -> bool:
        return self.mode in CDC_MODES

    def sink_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~stream_sink.spark.DeltaSink`."""
        return {
            "path": self.path,
            "mode": self.mode,
            "partition_by": self.partition_by,
            "equality_fields": self.equality_fields,
            "row_kind_column": self.row_kind_column,
            "order_by": self.order_by,
            "sink_id": self.sink_id,
            "checkpoint_location": self.checkpoint_location,
            "spark_checkpoint_location": self.spark_checkpoint_location,
            "state_dir": self.state_dir,
            "storage_options": self.storage,
            "maintenance": self.maintenance,
            "configuration": dict(self.configuration),
            "event_time_column": self.event_time_column,
            **self._key_limit(),
        }

    def _key_limit(self) -> dict[str, int]:
        limit = self.driver_key_limit
        return {} if limit is None else {"driver_key_limit": limit}


def target_of(options: Mapping[str, str]) -> str:
    """``iceberg`` or ``delta``: the value of the ``target`` option (InvalidOptionError
    for anything else)."""
    for key, value in options.items():
        if str(key).strip().lower() == TARGET:
            target = str(value).strip().lower()
            if target not in TARGETS:
                raise InvalidOptionError(
                    f"format('stream_sink'): target={value!r} is not one of "
                    f"{', '.join(TARGETS)}; use .option('target', 'delta') for a Delta table"
                )
            return target
    return "iceberg"


def parse_delta_options(options: Mapping[str, str], *, streaming: bool) -> DeltaRouteOptions:
    """Check ``options`` of a Delta target (see module doc); raises InvalidOptionError."""
    sorted_options = sort_options(
        options,
        names=DELTA_OPTIONS,
        families={
            CONFIGURATION_PREFIX: lambda raw_key, key: _configuration_key(raw_key),
            STORAGE_PREFIX: lambda raw_key, key: raw_key.strip().lower(),
            MAINTENANCE_PREFIX: after_prefix(MAINTENANCE_PREFIX),
        },
        skip=(TARGET,),
        refusal=_refusal,
    )
    given, spark_checkpoint = sorted_options.named, sorted_options.spark_checkpoint
    storage = sorted_options.families[STORAGE_PREFIX]
    maintenance = sorted_options.families[MAINTENANCE_PREFIX]
    configuration = sorted_options.families[CONFIGURATION_PREFIX]
    if not given.get("path", "").strip():
        raise InvalidOptionError(
            f"{WHERE} needs the table's location: .option('path', DIR), or .save(DIR) / .start(DIR)"
        )
    require_spark_checkpoint(spark_checkpoint, streaming=streaming, where=WHERE)
    check_interval_batches(
        given, WHERE, "(a Delta MERGE must see the previous batch, so every micro-batch commits)"
    )
    route_commit_mode(given.get("commit-mode", "synchronous"), where=WHERE)
    spark_root = resolve_location(spark_checkpoint) if spark_checkpoint else None
    lists = {k: split_list(given[k], WHERE) for k in LIST_OPTIONS if k in given}
    key_limit = _key_limit(given.get("driver-key-limit"))
    sink_maintenance = parse_maintenance(
        given.get(MAINTENANCE), maintenance, DeltaMaintenanceOptions, WHERE
    )
    sink = parse_delta_sink_options(
        where=WHERE,
        mode=given.get("mode", "append").strip().lower(),
        partition_by=lists.get("partition-by"),
        equality_fields=lists.get("equality-fields"),
        row_kind_column=given.get("row-kind-column") or None,
        order_by=lists.get("order-by"),
        driver_key_limit=key_limit,
        names=ROUTE_OPTION_NAMES,
        unused_refused=True,
        prefix=f"{WHERE}: ",
    )
    return DeltaRouteOptions(
        path=resolve_location(given["path"].strip()),
        mode=sink.mode,
        partition_by=sink.partition_by,
        equality_fields=sink.equality_fields,
        row_kind_column=sink.row_kind_column,
        order_by=sink.order_by,
        sink_id=given.get("sink-id") or None,
        checkpoint_location=given.get("checkpoint-location") or spark_root,
        spark_checkpoint_location=spark_root,
        state_dir=given.get("state-dir", "state"),
        driver_key_limit=sink.driver_key_limit,
        storage_options=tuple(sorted(storage.items())),
        configuration=tuple(sorted(configuration.items())),
        maintenance=sink_maintenance,
        resume_from_table=resume_point(given.get("resume-from-table"), "resume-from-table"),
        event_time_column=(given.get("event-time-column") or "").strip() or None,
    )


DELTA_CONFIGURATION_KEYS = (
    "delta.appendOnly",
    "delta.checkpointInterval",
    "delta.checkpointPolicy",
    "delta.checkpoint.writeStatsAsJson",
    "delta.checkpoint.writeStatsAsStruct",
    "delta.columnMapping.mode",
    "delta.dataSkippingNumIndexedCols",
    "delta.dataSkippingStatsColumns",
    "delta.deletedFileRetentionDuration",
    "delta.enableChangeDataFeed",
    "delta.enableDeletionVectors",
    "delta.enableExpiredLogCleanup",
    "delta.enableTypeWidening",
    "delta.logRetentionDuration",
    "delta.minReaderVersion",
    "delta.minWriterVersion",
    "delta.setTransactionRetentionDuration",
)
"""Delta Lake's table configuration keys in their own spelling: Spark lower-cases option
keys, Delta Lake matches these without regard to case, and the log keeps them so."""
_CANONICAL = {k.lower(): k for k in DELTA_CONFIGURATION_KEYS}


def _configuration_key(raw_key: str) -> str:
    """The configuration key of a ``configuration.<key>`` option: a Delta Lake key in its
    own spelling (``delta.appendOnly``), any other as given."""
    key = raw_key.strip()[len(CONFIGURATION_PREFIX) :]
    if not key:
        raise InvalidOptionError(
            f"{WHERE}: option {raw_key!r} names no configuration key; use, for example, "
            ".option('configuration.delta.appendOnly', 'true')"
        )
    return _CANONICAL.get(key.lower(), key)


def _key_limit(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidOptionError(f"{WHERE}: driver-key-limit={raw!r}: expected an integer >= 0")
    return value


def _refusal(raw_key: str, key: str) -> str:
    for name, why in ICEBERG_ONLY.items():
        if key == name or (name.endswith(".") and key.startswith(name)):
            return f"{WHERE}: option {raw_key!r} is for Iceberg tables ({why})"
    refusal = not_on_this_route(raw_key, key, WHERE)
    if refusal is not None:
        return refusal
    return (
        f"{WHERE}: unknown option {raw_key!r}; options are {', '.join(DELTA_OPTIONS)}, "
        f"{STORAGE_PREFIX}<key>, {MAINTENANCE_PREFIX}<field>"
    )
