"""Which version of each table a consistent read across the tables of one sink reads,
whatever the table format: the rule, given each table's stamped versions.

A sink stamps every version it commits with the checkpoint (highest batch id) it
covers (Iceberg: the snapshot summary; Delta: the ``txn`` version of that commit). The
consistent checkpoint of a set of tables is the newest one every table has reached (the
smallest of their newest stamps); each table is read at its newest version stamped at
or below it. A table a checkpoint did not touch keeps an older stamp, and that version
is still its state at the checkpoint.

Invariants:
- Every table gets a version, or the read is refused (NoSuchSnapshotError naming the
  table): a table the sink never stamped, or whose versions at or below the checkpoint
  are gone (expired), has no state at it that can be proven.
- Nothing here reads a table: the format's module lists the stamps
  (:mod:`.iceberg.consistent`, :mod:`.delta.consistent`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stream_sink.exceptions import NoSuchSnapshotError, ValidationError

Stamped = tuple[int, int]
"""(checkpoint id stamped, version): an Iceberg snapshot id or a Delta log version."""


def routed_operator_id(sink_id: str, table: str) -> str:
    """The operator id a routed sink (``table_column``) commits ``table`` under."""
    return f"{sink_id}={table}"


@dataclass(frozen=True)
class TableAt:
    """One table of a consistent read: the version to read and the checkpoint it is stamped
    with (``exact`` when that is the read's checkpoint; else the checkpoint did not touch
    the table and its older version is its state at it)."""

    table: str
    operator_id: str
    version: int
    checkpoint_id: int
    exact: bool


@dataclass(frozen=True)
class ConsistentRead:
    """The checkpoint every table has reached and the version of each to read at it."""

    checkpoint_id: int
    tables: tuple[TableAt, ...]

    def version_of(self, table: str) -> int:
        for t in self.tables:
            if t.table == table:
                return t.version
        raise ValidationError(f"table {table} is not part of this read")


def choose(
    stamps: Mapping[str, Sequence[Stamped]], operator_ids: Mapping[str, str]
) -> ConsistentRead:
    """The read of the tables ``stamps`` lists, each with its stamped versions newest
    first (see the module's rule)."""
    if not stamps:
        raise ValidationError("a consistent read needs at least one table")
    for name, versions in stamps.items():
        if not versions:
            raise NoSuchSnapshotError(
                f"table {name} holds no version stamped by sink {operator_ids[name]}: it has "
                "no state at any checkpoint of that sink"
            )
    checkpoint = min(max(s for s, _ in versions) for versions in stamps.values())
    picked = []
    for name, versions in stamps.items():
        at = next(((s, v) for s, v in versions if s <= checkpoint), None)
        if at is None:
            raise NoSuchSnapshotError(
                f"table {name}: no version stamped by sink {operator_ids[name]} at or below "
                f"checkpoint {checkpoint} is left (expired); the tables cannot be read "
                "consistently"
            )
        picked.append(TableAt(name, operator_ids[name], at[1], at[0], at[0] == checkpoint))
    return ConsistentRead(checkpoint, tuple(picked))
