"""Where a routed sink may write: ``IcebergSink(table_column=..., namespaces=[...],
tables=[...])``.

A routed sink takes each row's table from the row itself (Debezium's source database,
schema and table), so the names come from whoever writes the source, not from the
operator. The operator bounds them:

- ``namespaces``: the namespaces whose tables rows may name (and, with
  ``create_tables``, create); a namespace of several levels is ``"a.b"``, and names only
  itself, never the namespaces inside it.
- ``tables``: tables given by name, in any namespace.
- The dead-letter table, given by name too.

Invariants:
- A routing value is a name only when every part of it is non-empty and free of ``.``,
  ``/`` and control characters (:func:`~stream_sink.table.catalog.base.part_problem`),
  whatever the catalog; otherwise, or outside the scope, its rows are refused (or go
  to the dead-letter table) before anything is created or written, with a message
  naming the value and the option that would admit it.
- A TRUNCATE empties only a table the sink owns: one it created itself (recorded in its
  registry of tables) or one given in ``tables``. Naming a namespace lets rows into
  its tables, not a truncate of a table someone else made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stream_sink.exceptions import InvalidOptionError, ValidationError
from stream_sink.table.catalog.base import Identifier, dotted, part_problem, to_identifier

NAME_RULE = "no part empty or holding '.', '/' or a control character"


def parse_identifier(value: Any, what: str) -> Identifier:
    """``value`` (``"a.b"`` or a sequence of parts) as an identifier whose every part is
    usable in every catalog; InvalidOptionError naming ``what`` otherwise."""
    try:
        ident = to_identifier(value)
    except (ValidationError, TypeError) as e:
        raise InvalidOptionError(f"{what}: {value!r} is not a name such as 'db' ({e})") from e
    for part in ident:
        problem = part_problem(part)
        if problem is not None:
            raise InvalidOptionError(f"{what}: {value!r} has a part that {problem} ({NAME_RULE})")
    return ident


@dataclass(frozen=True)
class RouteScope:
    """The namespaces and tables a routed sink may write (see the module docstring)."""

    namespaces: frozenset[Identifier]
    tables: frozenset[Identifier]
    dead_letter: Identifier | None = None

    @staticmethod
    def parse(
        namespaces: Sequence[str] | str | None,
        tables: Sequence[str] | str | None,
        dead_letter: str | None = None,
    ) -> RouteScope:
        """The scope of ``IcebergSink(namespaces=..., tables=...)``; one of them is
        required, since without them rows could name any table of the catalog."""
        if not namespaces and not tables:
            raise InvalidOptionError(
                "a routed sink (table_column=...) writes only where you allow it: pass "
                "namespaces=[...] (the namespaces whose tables its rows may name, e.g. "
                "namespaces=['inv', 'shop'] for rows naming 'inv.customers' and "
                "'shop.items') and/or tables=[...] (tables given by name, which a "
                "TRUNCATE may also empty)"
            )
        spaces = frozenset(parse_identifier(n, "namespaces") for n in _listed(namespaces))
        given = frozenset(parse_identifier(t, "tables") for t in _listed(tables))
        if any(len(t) < 2 for t in given):
            raise InvalidOptionError(f"tables: {list(tables or ())} must each be 'namespace.table'")
        dead = None if dead_letter is None else parse_identifier(dead_letter, "dead_letter_table")
        return RouteScope(spaces, given, dead)

    def describe(self) -> str:
        parts = []
        if self.namespaces:
            parts.append(f"namespaces {sorted(dotted(n) for n in self.namespaces)}")
        if self.tables:
            parts.append(f"tables {sorted(dotted(t) for t in self.tables)}")
        return " and ".join(parts)

    def given(self, name: str) -> bool:
        """Whether ``name`` is a table the operator gave the sink by name."""
        return _split(name) in self.tables

    def problem(self, name: str) -> str | None:
        """Why rows naming ``name`` may not be written (None: they may, as far as names
        go; whether the table exists is the router's question)."""
        ident = _split(name)
        for part in ident:
            problem = part_problem(part)
            if problem is not None:
                return f"is not a table name: a part of it {problem} ({NAME_RULE}, in any catalog)"
        if len(ident) < 2:
            return "is not a table name such as 'db.table'"
        if ident == self.dead_letter:
            return "names the dead-letter table"
        if ident in self.tables or ident[:-1] in self.namespaces:
            return None
        return (
            f"names a table in namespace {dotted(ident[:-1])!r}, outside this sink's "
            f"{self.describe()}. If its tables belong to this stream, add "
            f"{dotted(ident[:-1])!r} to namespaces= (or {name!r} to tables=)"
        )

    def truncate_refusal(self, name: str, created: bool) -> str | None:
        """Why a TRUNCATE of ``name`` may not empty it (None: it may); ``created``:
        the sink created the table itself."""
        if created or self.given(name):
            return None
        return (
            f"a TRUNCATE (row kind -T) names table {name}, which this sink neither created "
            "nor was given by name: it empties only tables it owns. If this stream may "
            f"empty it, add {name!r} to tables=; otherwise leave truncates out of the "
            "stream (Debezium's skipped.operations=t)"
        )


def _listed(value: Sequence[str] | str | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _split(name: str) -> Identifier:
    return tuple(str(name).split("."))
