"""The sink's options, parsed and checked once per target, whichever front door took them.

An Iceberg sink's options are :func:`parse_options`'s (``IcebergSink``'s keyword
arguments; ``format("stream_sink")`` turns its string options into the same
arguments), a Delta sink's are :func:`parse_delta_sink_options`'s (``DeltaSink``'s keyword
arguments, and the string options of ``format("stream_sink")`` with target delta).

Invariants:
- Every option is validated here; a bad value raises InvalidOptionError naming it.
- Locations are resolved once: a relative local path becomes absolute (the driver's
  working directory may change; Spark resolves it against the same directory), a
  URI (``s3://...``) is kept as given.
- The layout under ``checkpoint_location`` is fixed: ``spark/`` is Spark's
  checkpointLocation, ``<sink id>/chk-<id>`` are the sink's completed checkpoints.
  Keeping both under one root is what lets a restart find the same query id, Spark
  commit log and sink checkpoints together.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal
from urllib.parse import urlparse

from stream_sink.commit.schedule import ScheduleName, check_commit_mode
from stream_sink.commit.source_position import ResumePoint
from stream_sink.exceptions import InvalidOptionError
from stream_sink.state import state_dir_for, validate_sink_id

WriteMode = Literal["append", "upsert", "changelog", "overwrite"]
"""What the sink writes per row; the committer's ``CommitMode`` is derived from it."""
Distribution = Literal["none", "hash", "range"]
SchemaEvolution = Literal["none", "add-columns", "compatible"]
DeleteMode = Literal["equality", "positions"]
"""How an upsert/changelog sink deletes rows that earlier batches wrote: ``equality``
(equality delete files, as Flink's sink) or ``positions`` (deletion vectors on v3,
position delete files on v2, resolved on the driver at commit:
:mod:`stream_sink.commit.iceberg.position_deletes`)."""

WRITE_MODES: tuple[str, ...] = ("append", "upsert", "changelog", "overwrite")
CDC_MODES: tuple[str, ...] = ("upsert", "changelog")
DEFAULT_DRIVER_KEY_LIMIT = 1_000_000
"""Distinct keys of a batch held on the driver at most: bench/bench_delta_keys.py found
8M long keys held and 32M failing at the default 1g driver memory; the rewrite tasks
also carry the keys, so the limit stays well below."""
DISTRIBUTIONS: tuple[str, ...] = ("none", "hash", "range")
SCHEMA_EVOLUTIONS: tuple[str, ...] = ("none", "add-columns", "compatible")
DELETE_MODES: tuple[str, ...] = ("equality", "positions")
SPARK_CHECKPOINT_DIR = "spark"
DEFAULT_CHECKPOINT_ROOT = "checkpoints"


@dataclass(frozen=True)
class SinkOptions:
    """What one ``IcebergSink`` was asked to do; see ``IcebergSink`` for the meaning."""

    table: str
    mode: WriteMode
    equality_fields: tuple[str, ...] | None
    row_kind_column: str | None
    order_by: tuple[str, ...]
    distribution: Distribution
    sink_id: str
    checkpoint_location: str
    spark_checkpoint_location: str
    state_dir: str
    checkpoint_interval_batches: int | None
    checkpoint_interval_ms: int | None
    snapshot_properties: tuple[tuple[str, str], ...]
    branch: str
    schema_evolution: SchemaEvolution = "none"
    table_column: str | None = None
    """Routed sinks: the column naming each row's table (``table`` is then unused)."""
    commit_mode: ScheduleName = "synchronous"
    """When a checkpoint's table commit runs (:mod:`stream_sink.commit.schedule`)."""
    deletes: DeleteMode = "equality"
    """How rows written by earlier batches are deleted (:data:`DeleteMode`)."""
    resume_from_table: ResumePoint | None = None
    """Continue the query that recorded this position in the table (a new checkpoint)."""
    event_time_column: str | None = None
    """A timestamp, date or long column whose low and high value over each commit's data
    files the commit records (:mod:`stream_sink.commit.iceberg.event_time`)."""

    @property
    def is_cdc(self) -> bool:
        return self.mode in CDC_MODES

    @property
    def sink_state_dir(self) -> str:
        """``<state_dir>/<sink id>``: this sink's operator state."""
        return state_dir_for(self.state_dir, self.sink_id)

    @property
    def snapshot_property_map(self) -> dict[str, str]:
        return dict(self.snapshot_properties)

    def as_kwargs(self) -> dict[str, Any]:
        """``IcebergSink`` keyword arguments that parse back to these options."""
        kwargs = {f.name: getattr(self, f.name) for f in fields(self)}
        kwargs["snapshot_properties"] = self.snapshot_property_map
        if self.resume_from_table is not None:
            kwargs["resume_from_table"] = str(self.resume_from_table)
        return kwargs


def parse_options(
    *,
    table: str | None,
    mode: str = "append",
    equality_fields: Sequence[str] | str | None = None,
    row_kind_column: str | None = None,
    order_by: Sequence[str] | str | None = None,
    distribution: str = "none",
    sink_id: str | None = None,
    checkpoint_location: str | None = None,
    spark_checkpoint_location: str | None = None,
    state_dir: str = "state",
    checkpoint_interval_batches: int | None = 1,
    checkpoint_interval_ms: int | None = None,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = "main",
    schema_evolution: str = "none",
    table_column: str | None = None,
    commit_mode: str = "synchronous",
    deletes: str = "equality",
    cdc_names: CdcOptionNames | None = None,
    resume_from_table: str | None = None,
    event_time_column: str | None = None,
) -> SinkOptions:
    """Check and normalise the keyword arguments of ``IcebergSink``; ``cdc_names``: how
    the messages name the CDC options (default: as keyword arguments)."""
    if table_column is not None:
        if table is not None:
            raise InvalidOptionError(
                "give either table= (one table) or table_column= (each row names its table)"
            )
        table_column = _names("table_column", table_column)[0]
        table = ""
        sink_id = sink_id if sink_id is not None else f"routed-{table_column}"
    elif not isinstance(table, str) or not table.strip():
        raise InvalidOptionError(f"table must be a table name such as 'db.events', got {table!r}")
    mode_ = _choice("mode", mode, WRITE_MODES)
    if table_column is not None and resume_from_table:
        raise InvalidOptionError(
            f"resume_from_table={resume_from_table!r} with table_column={table_column!r}: a "
            "routed sink's tables record positions of their own (a table without rows in the "
            "last batches records an older one), so the stream cannot be continued from them "
            "exactly once; resume a sink of one table"
        )
    if table_column is not None and event_time_column:
        raise InvalidOptionError(
            f"event_time_column={event_time_column!r} with table_column={table_column!r}: a "
            "routed sink's tables need not share the column; record event times with a sink "
            "of one table"
        )
    sink = validate_sink_id(sink_id if sink_id is not None else table)
    root = resolve_location(checkpoint_location or f"{DEFAULT_CHECKPOINT_ROOT}/{sink}")
    spark_root = spark_checkpoint_location or f"{root}/{SPARK_CHECKPOINT_DIR}"
    orders = _names("order_by", order_by)
    keys = _names("equality_fields", equality_fields)
    _check_intervals(checkpoint_interval_batches, checkpoint_interval_ms)
    check_cdc_options(
        f"sink {sink!r}",
        mode_,
        equality_fields=keys,
        row_kind_column=row_kind_column,
        order_by=orders,
        names=cdc_names,
        keys_required=False,  # the table's identifier fields, when none are given
    )
    return SinkOptions(
        table=table.strip(),
        mode=mode_,  # type: ignore[arg-type]
        equality_fields=keys or None,
        row_kind_column=row_kind_column or None,
        order_by=orders,
        distribution=_choice("distribution", distribution, DISTRIBUTIONS),  # type: ignore[arg-type]
        sink_id=sink,
        checkpoint_location=root,
        spark_checkpoint_location=to_spark_uri(resolve_location(spark_root)),
        state_dir=resolve_location(state_dir),
        checkpoint_interval_batches=checkpoint_interval_batches,
        checkpoint_interval_ms=checkpoint_interval_ms,
        snapshot_properties=tuple(
            sorted((str(k), str(v)) for k, v in (snapshot_properties or {}).items())
        ),
        branch=_non_empty("branch", branch),
        schema_evolution=_choice("schema_evolution", schema_evolution, SCHEMA_EVOLUTIONS),  # type: ignore[arg-type]
        table_column=table_column,
        commit_mode=check_commit_mode(commit_mode, where=f"sink {sink!r}"),
        deletes=check_delete_mode(deletes, mode_, where=f"sink {sink!r}"),
        resume_from_table=resume_point(resume_from_table),
        event_time_column=_event_time_column(event_time_column),
    )


def _event_time_column(value: str | None, option: str = "event_time_column") -> str | None:
    """The column's name, or None; the table checks its type when the sink opens."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptionError(f"{option} must be a column name, got {value!r}")
    return value.strip()


def resume_point(value: str | None, option: str = "resume_from_table") -> ResumePoint | None:
    """The ``resume_from_table`` option: None, or ``<job id>:<batch id>``."""
    return (
        None if value is None or not str(value).strip() else ResumePoint.parse(value, option=option)
    )


def check_delete_mode(value: str, mode: str, *, where: str) -> DeleteMode:
    """``deletes`` checked against the write mode: ``positions`` needs a CDC mode (only
    upserts and changelogs delete rows of earlier batches); InvalidOptionError."""
    deletes = _choice("deletes", value, DELETE_MODES)
    if deletes == "positions" and mode not in CDC_MODES:
        raise InvalidOptionError(
            f"{where}: deletes='positions' needs mode='upsert' or 'changelog' (mode={mode!r} "
            "deletes no rows of earlier batches)"
        )
    return deletes  # type: ignore[return-value]


@dataclass(frozen=True)
class DeltaSinkOptions:
    """What one Delta sink writes, checked: the same for ``DeltaSink`` and
    ``format("stream_sink")`` with target delta. Where the sink keeps its state and
    checkpoints is resolved by ``spark.runtime.DeltaPlaces`` when the sink opens."""

    mode: WriteMode
    partition_by: tuple[str, ...]
    equality_fields: tuple[str, ...]
    row_kind_column: str | None
    order_by: tuple[str, ...]
    driver_key_limit: int | None
    """None: the route's default (:data:`DEFAULT_DRIVER_KEY_LIMIT`), applied where it commits."""


def parse_delta_sink_options(
    *,
    where: str,
    mode: str = "append",
    partition_by: Sequence[str] | None = None,
    equality_fields: Sequence[str] | None = None,
    row_kind_column: str | None = None,
    order_by: Sequence[str] | str | None = None,
    driver_key_limit: int | None = DEFAULT_DRIVER_KEY_LIMIT,
    names: CdcOptionNames | None = None,
    unused_refused: bool = False,
    prefix: str = "",
) -> DeltaSinkOptions:
    """Check the options of a Delta sink: ``mode`` is a write mode, the CDC options fit
    it (:func:`check_cdc_options` with ``where``, ``names`` and ``unused_refused``; a
    Delta sink has no identifier fields to fall back on, so a CDC mode needs
    ``equality_fields``), and ``driver_key_limit`` is not negative. ``prefix`` starts
    the messages about the mode and the key limit; InvalidOptionError."""
    if mode not in WRITE_MODES:
        raise InvalidOptionError(f"{prefix}mode={mode!r} is not one of {', '.join(WRITE_MODES)}")
    if driver_key_limit is not None and driver_key_limit < 0:
        raise InvalidOptionError(f"{prefix}driver_key_limit={driver_key_limit}: expected >= 0")
    options = DeltaSinkOptions(
        mode=mode,  # type: ignore[arg-type]
        partition_by=tuple(partition_by or ()),
        equality_fields=tuple(equality_fields or ()),
        row_kind_column=row_kind_column,
        order_by=(order_by,) if isinstance(order_by, str) else tuple(order_by or ()),
        driver_key_limit=driver_key_limit,
    )
    check_cdc_options(
        where,
        options.mode,
        equality_fields=options.equality_fields,
        row_kind_column=options.row_kind_column,
        order_by=options.order_by,
        names=names,
        unused_refused=unused_refused,
    )
    return options


@dataclass(frozen=True)
class CdcOptionNames:
    """How a front door's user sets each CDC option, as its error messages name it."""

    equality_fields: str
    row_kind_column: str
    order_by: str


KEYWORD_NAMES = CdcOptionNames("equality_fields=", "row_kind_column=", "order_by=")
"""``IcebergSink``'s and ``DeltaSink``'s keyword arguments."""
ROUTE_OPTION_NAMES = CdcOptionNames(
    ".option('equality-fields', 'k1,k2')",
    ".option('row-kind-column', COLUMN)",
    ".option('order-by', COLUMN)",
)
"""``format("stream_sink")``'s options."""


def check_cdc_options(
    where: str,
    mode: str,
    *,
    equality_fields: Sequence[str],
    row_kind_column: str | None,
    order_by: Sequence[str],
    names: CdcOptionNames | None = None,
    keys_required: bool = True,
    unused_refused: bool = False,
) -> None:
    """The CDC options against ``mode``, in one wording for every front door (``where``
    names the sink, ``names`` spells the options; default :data:`KEYWORD_NAMES`).

    A CDC mode needs ``order_by``, and ``equality_fields`` when ``keys_required`` (an
    Iceberg sink falls back to the table's identifier fields); changelog mode needs the
    row kind column. Other modes refuse a row kind column and, when ``unused_refused``,
    equality fields and order columns too. InvalidOptionError."""
    names = names or KEYWORD_NAMES
    if mode in CDC_MODES:
        if keys_required and not equality_fields:
            raise InvalidOptionError(
                f"{where}: mode={mode!r} needs {names.equality_fields} (the key column(s))"
            )
        if not order_by:
            raise InvalidOptionError(
                f"{where}: mode={mode!r} needs {names.order_by} (the column(s) giving source "
                "order, such as an LSN or Kafka offset): without it changes of one key could "
                "be applied out of order"
            )
        if mode == "changelog" and not row_kind_column:
            raise InvalidOptionError(
                f"{where}: mode='changelog' needs {names.row_kind_column} (a column of +I/-U/+U/-D)"
            )
        return
    unused = [names.row_kind_column] if row_kind_column else []
    if unused_refused:
        unused += [names.equality_fields] if equality_fields else []
        unused += [names.order_by] if order_by else []
    if unused:
        raise InvalidOptionError(
            f"{where}: mode={mode!r} takes no {' or '.join(unused)}: only mode='upsert' and "
            f"'changelog' use {'it' if len(unused) == 1 else 'them'}"
        )


ROUTE_PIPELINED_REFUSAL = (
    "commit-mode 'pipelined' is not available on format('stream_sink'): Spark commits "
    "each micro-batch through a Python worker it starts for that one call, so nothing of "
    "the sink outlives the call to finish a table commit in the background (and the next "
    "batch's worker reopens the operator state the background commit would still hold); "
    "leaving the commit to the next batch would overlap nothing and leave a stopped "
    "query's last batch uncommitted until it runs again. Every batch commits in Spark's "
    "commit step ('synchronous'); use IcebergSink/DeltaSink with foreachBatch and "
    "commit_mode='pipelined' to take the commit off the batch's critical path"
)


def route_commit_mode(value: str, *, where: str) -> None:
    """Check the Data Source route's ``commit-mode`` option: ``synchronous`` is accepted
    (what the route does), ``pipelined`` refused with why (:data:`ROUTE_PIPELINED_REFUSAL`),
    anything else refused as not a commit mode; InvalidOptionError naming ``where``."""
    mode = check_commit_mode(value.strip().lower(), where=where)
    if mode == "pipelined":
        raise InvalidOptionError(f"{where}: {ROUTE_PIPELINED_REFUSAL}")


def resolve_location(location: str) -> str:
    """An absolute local path, or the URI unchanged (``file:`` prefixes are dropped)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # 1 letter: a drive
        path = parsed.path if parsed.scheme == "file" else location
        return os.path.abspath(path).rstrip("/") or "/"
    return location.rstrip("/")


def to_spark_uri(location: str) -> str:
    """The same location as Hadoop's filesystems name it: ``s3://`` is ``s3a://``."""
    if location.startswith("s3://"):
        return "s3a://" + location[len("s3://") :]
    return location


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    norm = str(value).strip().lower()
    if norm not in allowed:
        raise InvalidOptionError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return norm


def _names(name: str, value: Sequence[str] | str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else tuple(value)
    if any(not isinstance(v, str) or not v.strip() for v in items):
        raise InvalidOptionError(f"{name} must be column names, got {value!r}")
    if len(set(items)) != len(items):
        raise InvalidOptionError(f"{name} names a column twice: {list(items)}")
    return tuple(v.strip() for v in items)


def _non_empty(name: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptionError(f"{name} must be a non-empty string, got {value!r}")
    return value.strip()


def _check_intervals(batches: int | None, ms: int | None) -> None:
    for name, v in (("checkpoint_interval_batches", batches), ("checkpoint_interval_ms", ms)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InvalidOptionError(f"{name} must be a positive integer or None, got {v!r}")
    if batches is None and ms is None:
        raise InvalidOptionError(
            "set checkpoint_interval_batches or checkpoint_interval_ms: without either no "
            "checkpoint would ever be taken"
        )
