"""Which table a sink's operator state and checkpoints belong to.

The state records the table's identity (catalog, name, uuid) in its metadata area and
the checkpoint storage in ``_table.json`` and every checkpoint's ``_metadata``. A sink
started on a checkpoint location or state of another table (a reused location, a
copied ``sink_id``) is refused before anything is changed: otherwise one table's
staged batches would be committed into the other, and the first would never get them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from stream_sink.checkpoints import TableIdentity
from stream_sink.exceptions import TableMismatchError
from stream_sink.state import OperatorStateBackend

log = logging.getLogger(__name__)

META_TABLE = "table"
"""State metadata: the JSON of the :class:`TableIdentity` the state belongs to."""


def stored_identity(backend: OperatorStateBackend) -> TableIdentity | None:
    raw = backend.get_meta(META_TABLE)
    if raw is None:
        return None
    return TableIdentity.from_json(raw, where=f"state directory {backend.location}, table")


def refuse_other_table(
    recorded: TableIdentity | None, current: TableIdentity, *, sink_id: str, where: str
) -> None:
    """Raise TableMismatchError when ``where`` recorded another table than ``current``."""
    if recorded is None:
        return
    if recorded.same_table(current):
        if recorded.table != current.table or recorded.catalog != current.catalog:
            log.info(
                "sink %s: %s records %s, now known as %s",
                sink_id,
                where,
                recorded.describe(),
                current.describe(),
            )
        return
    raise TableMismatchError(
        f"sink {sink_id}: the checkpoint location belongs to another table: {where} "
        f"records {recorded.describe()}, but this sink writes {current.describe()}. Nothing "
        f"was changed. Give {current.table} its own checkpoint location and state directory "
        f"(and sink id), or point this sink back at {recorded.table}"
    )


def refuse_location_of_other_tables(
    others: Mapping[str, TableIdentity], current: TableIdentity, *, sink_id: str, where: str
) -> None:
    """Upstream acknowledged batches this sink has no record of, while other sinks of
    the location write other tables: the location was reused for another table."""
    foreign = {s: t for s, t in others.items() if not t.same_table(current)}
    if not foreign:
        return
    owners = ", ".join(f"sink {s} of {t.describe()}" for s, t in sorted(foreign.items()))
    raise TableMismatchError(
        f"sink {sink_id}: the checkpoint location belongs to another table: {where} holds "
        f"{owners}, and Spark's commit log there acknowledges batches this sink of "
        f"{current.describe()} never recorded. Nothing was changed. Give {current.table} "
        "its own checkpoint location and state directory"
    )
