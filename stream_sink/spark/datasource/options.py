"""Options of the ``format("stream_sink")`` route: Spark's string map to sink arguments.

Spark hands a data source its options as a case-insensitive map of strings (keys
arrive lower-cased). They mirror ``IcebergSink``'s keyword arguments with ``-`` for
``_`` (the ``_`` spelling is accepted too); lists are comma-separated; catalog settings
are ``catalog.<key>``; snapshot summary properties are ``snapshot-property.<key>``.

=============================  ======================================================
option                         meaning (default)
=============================  ======================================================
``target``                     ``iceberg`` (the default) or ``delta`` (options of a
                               Delta target: ``delta.options``)
``table``                      target table, ``db.name`` (required)
``mode``                       ``append`` | ``overwrite`` | ``upsert`` | ``changelog``
                               (``append``); batch writes: ``append`` | ``overwrite``
``equality-fields``            key columns of CDC modes (the table's identifier fields)
``row-kind-column``            column of ``+I/-U/+U/-D`` (changelog; optional in upsert)
``order-by``                   column(s) giving source order (required in CDC modes)
``sink-id``                    stable name of the sink (the table name)
``state-dir``                  operator state directory on the driver (``state``)
``checkpoint-location``        where the sink's completed checkpoints go
                               (Spark's ``checkpointLocation``)
``checkpoint-interval-batches`` ``1`` only: every micro-batch commits
``commit-mode``                ``synchronous`` only: ``pipelined`` is refused (why:
                               :data:`~stream_sink.spark.options.ROUTE_PIPELINED_REFUSAL`)
``branch``                     target branch (``main``)
``deletes``                    ``equality`` | ``positions`` (upsert/changelog only;
                               ``equality``): see ``IcebergSink``'s ``deletes``
``resume-from-table``          ``<job id>:<batch id>``: continue the query that
                               recorded this position in the table (a new checkpoint)
``event-time-column``          a timestamp, date or long column: each commit records
                               its low and high value over the commit's data files
``catalog.type``               ``hadoop`` | ``sql`` | ``rest`` (``hadoop``)
``catalog.warehouse``          warehouse location (required for ``hadoop``)
``catalog.uri``                database URI of a ``sql`` catalog, URL of a ``rest`` one
``catalog.name``               catalog name (``stream_sink``)
``catalog.<key>``              any other catalog property (``s3.endpoint``, ``jdbc.user``)
``snapshot-property.<key>``    extra snapshot summary property
``maintenance``                ``true``: compaction, delete conversion and expiry
                               after the stream's commits, as ``IcebergSink(
                               maintenance=MaintenanceOptions())`` (``false``;
                               streams only; run in the commit, see ``commit``)
``maintenance.<field>``        a field of :class:`~stream_sink.maintenance.
                               MaintenanceOptions` with ``-`` for ``_``
                               (``maintenance.commit-count``); setting one turns
                               maintenance on; ``background`` may only be ``false``
``checkpointLocation``         Spark's checkpoint location (required for streams)
=============================  ======================================================

Invariants: an unknown option, or one that has no meaning on this route
(``distribution``, ``checkpoint-interval-ms``, ``metrics-port``,
``spark-checkpoint-location``), raises InvalidOptionError naming it and the accepted
names; relative locations are made absolute where the options are parsed (on the
driver), so executors never resolve them against their own working directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stream_sink.exceptions import InvalidOptionError
from stream_sink.maintenance.options import MaintenanceOptions
from stream_sink.spark.datasource.delta.options import (
    DeltaRouteOptions,
    parse_delta_options,
    target_of,
)
from stream_sink.spark.datasource.keys import (
    CATALOG_PREFIX,
    MAINTENANCE,
    MAINTENANCE_PREFIX,
    NOT_ON_THIS_ROUTE,
    SHARED_OPTIONS,
    SNAPSHOT_PREFIX,
    SPARK_OWN,
    after_prefix,
    check_interval_batches,
    not_on_this_route,
    parse_maintenance,
    require_spark_checkpoint,
    sort_options,
    split_list,
)
from stream_sink.spark.options import (
    ROUTE_OPTION_NAMES,
    SinkOptions,
    parse_options,
    resolve_location,
    route_commit_mode,
)

__all__ = ["NOT_ON_THIS_ROUTE", "SINK_OPTIONS", "SourceOptions", "parse_route_options"]

WHERE = "format('stream_sink')"
SINK_OPTIONS = ("table", *SHARED_OPTIONS, "branch", "deletes")
LIST_OPTIONS = ("equality-fields", "order-by")


@dataclass(frozen=True)
class SourceOptions:
    """Parsed options: the sink's, and the catalog's."""

    sink: SinkOptions
    catalog_name: str
    catalog: tuple[tuple[str, str], ...] = field(repr=False)
    """``load_catalog`` keyword arguments (``type``, ``warehouse``, ``uri``, properties):
    credentials among them, so never in a repr."""
    maintenance: MaintenanceOptions | None = None
    """In-sink maintenance after the stream's commits, run in the foreground (None: none)."""

    def open_catalog(self) -> Any:
        from stream_sink.catalogs import load_catalog

        args: dict[str, Any] = dict(self.catalog)
        return load_catalog(self.catalog_name, **args)


def parse_route_options(
    options: Mapping[str, str], *, streaming: bool
) -> SourceOptions | DeltaRouteOptions:
    """The options of either target (``.option("target", ...)``); InvalidOptionError."""
    if target_of(options) == "delta":
        return parse_delta_options(options, streaming=streaming)
    return parse_source_options(options, streaming=streaming)


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check ``options`` of an Iceberg target (see module doc); raises InvalidOptionError."""
    given = sort_options(
        options,
        names=SINK_OPTIONS,
        families={
            CATALOG_PREFIX: after_prefix(CATALOG_PREFIX),
            SNAPSHOT_PREFIX: after_prefix(SNAPSHOT_PREFIX),
            MAINTENANCE_PREFIX: after_prefix(MAINTENANCE_PREFIX),
        },
        skip=SPARK_OWN,
        refusal=_refusal,
    )
    sink, spark_checkpoint = given.named, given.spark_checkpoint
    catalog = given.families[CATALOG_PREFIX]
    if "table" not in sink:
        path = next((v for k, v in options.items() if str(k).lower() == "path"), None)
        delta = f", or .option('target', 'delta') to write a Delta table at {path!r}"
        raise InvalidOptionError(
            "format('stream_sink') needs .option('table', 'db.name') for an Iceberg table"
            + (delta if path else "")
        )
    require_spark_checkpoint(spark_checkpoint, streaming=streaming, where=WHERE)
    return SourceOptions(
        sink=_sink_options(sink, given.families[SNAPSHOT_PREFIX], spark_checkpoint),
        catalog_name=catalog.pop("name", "stream_sink"),
        catalog=tuple(sorted(_catalog_args(catalog).items())),
        maintenance=_maintenance(sink.get(MAINTENANCE), given.families[MAINTENANCE_PREFIX]),
    )


def _refusal(raw_key: str, key: str) -> str:
    refusal = not_on_this_route(raw_key, key, WHERE)
    if refusal is not None:
        return refusal
    return (
        f"format('stream_sink'): unknown option {raw_key!r}; options are "
        f"{', '.join(SINK_OPTIONS)}, catalog.<key>, {SNAPSHOT_PREFIX}<key>, "
        f"{MAINTENANCE_PREFIX}<field>"
    )


def _maintenance(switch: str | None, given: dict[str, str]) -> MaintenanceOptions | None:
    """``MaintenanceOptions`` from the ``maintenance`` options, to run in the commit's
    worker: ``background`` is always false there (nothing of the worker outlives the
    commit), so ``maintenance.background=true`` is refused."""
    options = parse_maintenance(switch, given, MaintenanceOptions, WHERE)
    if options is None:
        return None
    if "background" in given and options.background:
        raise InvalidOptionError(
            f"{WHERE}: maintenance.background='true' is not possible on this route: each "
            "micro-batch's commit runs in a Python worker that ends with it, so maintenance "
            "runs in that commit, after the batch is committed; drop the option, or use "
            "IcebergSink(maintenance=MaintenanceOptions(...)) with foreachBatch for runs "
            "in the background"
        )
    return dataclasses.replace(options, background=False)


def _sink_options(
    given: dict[str, str], props: dict[str, str], spark_checkpoint: str | None
) -> SinkOptions:
    check_interval_batches(
        given,
        WHERE,
        "here (every micro-batch commits in Spark's commit step); use "
        "IcebergSink.foreach_batch to commit every N batches",
    )
    route_commit_mode(given.get("commit-mode", "synchronous"), where=WHERE)
    spark_root = resolve_location(spark_checkpoint) if spark_checkpoint else None
    lists = {k: list(split_list(given[k], WHERE)) for k in LIST_OPTIONS if k in given}
    return parse_options(
        table=given["table"],
        mode=given.get("mode", "append"),
        equality_fields=lists.get("equality-fields"),
        row_kind_column=given.get("row-kind-column") or None,
        order_by=lists.get("order-by"),
        sink_id=given.get("sink-id") or None,
        checkpoint_location=given.get("checkpoint-location") or spark_root,
        spark_checkpoint_location=spark_root,
        state_dir=given.get("state-dir", "state"),
        snapshot_properties=props,
        branch=given.get("branch", "main"),
        deletes=given.get("deletes", "equality"),
        cdc_names=ROUTE_OPTION_NAMES,
        resume_from_table=given.get("resume-from-table") or None,
        event_time_column=given.get("event-time-column") or None,
    )


def _catalog_args(catalog: dict[str, str]) -> dict[str, str]:
    args = {"type": "hadoop", **catalog}
    for key in ("warehouse",):
        if args.get(key) and "://" not in args[key]:
            args[key] = resolve_location(args[key])
    if args.get("uri", "").startswith("sqlite:///"):
        path = args["uri"][len("sqlite:///") :]
        args["uri"] = "sqlite:///" + resolve_location(path)
    return args
