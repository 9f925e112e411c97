"""What both targets of ``format("stream_sink")`` do alike with Spark's string options.

Spark hands a data source its options as a case-insensitive map of strings (keys arrive
lower-cased). Both targets (:mod:`.options` for Iceberg, :mod:`.delta.options` for
Delta) sort Spark's options into the same buckets (:func:`sort_options`: a target's
own names, its prefixed families, Spark's checkpoint location), normalize keys the same
way, take lists as comma-separated strings, refuse the
same options that have no meaning on this route, check Spark's checkpoint location and
the commit interval the same way, and read in-sink maintenance from ``maintenance`` and
``maintenance.<field>`` options into the target's maintenance options dataclass.

Invariants: every refusal raises InvalidOptionError naming the option and what to do
instead; nothing here knows a target's own options.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from stream_sink.exceptions import InvalidOptionError

CATALOG_PREFIX = "catalog."
SNAPSHOT_PREFIX = "snapshot-property."
SPARK_CHECKPOINT = "checkpointlocation"
SPARK_OWN = frozenset({SPARK_CHECKPOINT, "path", "target"})
"""Options Spark itself sets or uses; accepted and not passed on."""
MAINTENANCE = "maintenance"
MAINTENANCE_PREFIX = "maintenance."
"""``maintenance.<field>``: a field of the target's maintenance options, ``-`` for ``_``."""

SHARED_OPTIONS = (
    "mode",
    "equality-fields",
    "row-kind-column",
    "order-by",
    "sink-id",
    "state-dir",
    "checkpoint-location",
    "checkpoint-interval-batches",
    "commit-mode",
    "maintenance",
    "resume-from-table",
    "event-time-column",
)
"""The sink options both targets take, with the same meaning (each target's module
doc lists them with its own)."""

NOT_ON_THIS_ROUTE = {
    "distribution": "the route cannot repartition the query: call "
    ".repartition(<key columns>) on the DataFrame before writeStream",
    "checkpoint-interval-ms": "every micro-batch commits in Spark's commit step; use "
    "IcebergSink.foreach_batch for time-based checkpoints",
    "metrics-port": "commits run in a short-lived Python worker; use IcebergSink with "
    "foreachBatch for a metrics endpoint",
    "spark-checkpoint-location": "set Spark's .option('checkpointLocation', DIR)",
}
"""Sink arguments that have no meaning on this route, with what to do instead."""

T = TypeVar("T")


def normalize_key(key: str) -> str:
    """``order_by`` and ``Order-By`` are ``order-by``; catalog and snapshot property
    names after their prefix keep their spelling (lower-cased by Spark already)."""
    low = key.strip().lower()
    if low.startswith(CATALOG_PREFIX) or low in SPARK_OWN:
        return low
    for prefix in (SNAPSHOT_PREFIX, SNAPSHOT_PREFIX.replace("-", "_")):
        if low.startswith(prefix):
            return SNAPSHOT_PREFIX + low[len(prefix) :]
    return low.replace("_", "-")


PrefixKey = Callable[[str, str], str]
"""How a prefixed option's key is kept: called with (the key as given, the normalized
key), returns the key under which its value is kept in its family."""


def after_prefix(prefix: str) -> PrefixKey:
    """A family keyed by what follows ``prefix`` in the normalized key."""
    return lambda raw_key, key: key[len(prefix) :]


@dataclass(frozen=True)
class SortedOptions:
    """Spark's options of one target, sorted: its own names, each prefixed family keyed
    as the target keeps it, and Spark's checkpoint location."""

    named: dict[str, str]
    families: dict[str, dict[str, str]]
    """Keyed by prefix (``catalog.``, ``maintenance.``, …), then by the family's key."""
    spark_checkpoint: str | None


def sort_options(
    options: Mapping[str, str],
    *,
    names: Collection[str],
    families: Mapping[str, PrefixKey],
    skip: Collection[str],
    refusal: Callable[[str, str], str],
) -> SortedOptions:
    """Sort ``options`` into a target's buckets: Spark's checkpoint location; ``skip``
    (keys accepted and not passed on); the first of ``families`` whose prefix the key
    starts with; the target's own ``names``. Any other key raises InvalidOptionError
    with ``refusal(key as given, normalized key)``, before anything is opened."""
    named: dict[str, str] = {}
    sorted_families: dict[str, dict[str, str]] = {prefix: {} for prefix in families}
    spark_checkpoint = None
    for raw, value in options.items():
        raw_key = str(raw)
        key = normalize_key(raw_key)
        family = next((p for p in families if key.startswith(p)), None)
        if key == SPARK_CHECKPOINT:
            spark_checkpoint = str(value)
        elif key in skip:
            continue
        elif family is not None:
            sorted_families[family][families[family](raw_key, key)] = str(value)
        elif key in names:
            named[key] = str(value)
        else:
            raise InvalidOptionError(refusal(raw_key, key))
    return SortedOptions(named, sorted_families, spark_checkpoint)


def split_list(value: str, where: str) -> tuple[str, ...]:
    """``"a, b"`` is ``("a", "b")``; an empty item is refused."""
    items = tuple(v.strip() for v in value.split(","))
    if any(not v for v in items):
        raise InvalidOptionError(f"{where}: {value!r} is not a comma-separated list of columns")
    return items


def not_on_this_route(raw_key: str, key: str, where: str) -> str | None:
    """The refusal of an option this route has no meaning for; None for any other."""
    if key not in NOT_ON_THIS_ROUTE:
        return None
    return f"{where}: option {raw_key!r} is not available on this route: {NOT_ON_THIS_ROUTE[key]}"


def require_spark_checkpoint(spark_checkpoint: str | None, *, streaming: bool, where: str) -> None:
    if streaming and spark_checkpoint is None:
        raise InvalidOptionError(
            f"{where} needs Spark's .option('checkpointLocation', DIR): the sink finds its "
            "query id and commit log there"
        )


def check_interval_batches(given: Mapping[str, str], where: str, why: str) -> None:
    """``checkpoint-interval-batches`` may only be 1 (every micro-batch commits)."""
    interval = given.get("checkpoint-interval-batches", "1").strip()
    if interval != "1":
        raise InvalidOptionError(
            f"{where}: checkpoint-interval-batches={interval!r}: only 1 is possible {why}"
        )


def parse_maintenance(
    switch: str | None, given: Mapping[str, str], cls: type[T], where: str
) -> T | None:
    """The maintenance options ``cls`` (a dataclass) from the ``maintenance`` option
    (``switch``: ``true``/``false``) and the ``maintenance.<field>`` options (``given``,
    keyed by ``<field>`` with ``-`` for ``_``). Maintenance is on when ``switch`` is
    true or any field is given; None when it is off."""
    on = _bool(switch, MAINTENANCE, where) if switch is not None else bool(given)
    if not on:
        if given:
            named = sorted(MAINTENANCE_PREFIX + k for k in given)
            raise InvalidOptionError(
                f"{where}: maintenance is 'false' but {named} are set; drop them or set "
                ".option('maintenance', 'true')"
            )
        return None
    hints = typing.get_type_hints(cls)
    names = {f.name.replace("_", "-"): f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, raw in given.items():
        if key not in names:
            raise InvalidOptionError(
                f"{where}: unknown option {MAINTENANCE_PREFIX + key!r}; maintenance options are "
                + ", ".join(MAINTENANCE_PREFIX + n for n in names)
            )
        kwargs[names[key]] = _value(raw, hints[names[key]], MAINTENANCE_PREFIX + key, where)
    try:
        return cls(**kwargs)
    except InvalidOptionError as e:
        raise InvalidOptionError(f"{where}: {e}") from None


def _value(raw: str, hint: Any, key: str, where: str) -> Any:
    """``raw`` as a ``bool``, ``int`` or ``int | None`` (``none`` or empty) field."""
    text = raw.strip().lower()
    if hint is bool:
        return _bool(raw, key, where)
    args = typing.get_args(hint)
    if type(None) in args and text in ("", "none", "null"):
        return None
    if hint is int or int in args:
        try:
            return int(text)
        except ValueError:
            raise InvalidOptionError(f"{where}: {key}={raw!r}: expected an integer") from None
    raise InvalidOptionError(f"{where}: {key} cannot be set as an option")


def _bool(raw: str, key: str, where: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise InvalidOptionError(f"{where}: {key}={raw!r}: expected 'true' or 'false'")
    return text == "true"
