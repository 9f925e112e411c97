"""The catalog contract: namespaces, tables, and the atomic metadata swap.

Invariants:
- A table's state is exactly one metadata file; a commit is a compare-and-swap
  from the metadata location the change was computed against (``base``) to a new
  file. Losing the race raises CommitFailedError (safe to retry after a refresh);
  an outcome that cannot be known raises CommitStateUnknownError (never retried
  blindly, never cleaned up: the new file may be the table's current state).
- A failed commit leaves the table at its previous metadata.
- Every successful commit records the replaced file in the new file's metadata
  log (Java's ``previousFiles``), so the log counts the table's versions.
- A commit of several tables (:meth:`Catalog.commit_tables`) is all or nothing: every
  table swaps from its own base or none does. Only catalogs that can do that in one
  step offer it (SQL: one database transaction; REST: ``transactions/commit``); the
  others say why not (:meth:`Catalog.multi_table_commit_problem`) and refuse with
  AtomicCommitUnsupportedError, never committing the tables one by one behind the
  caller's back. A commit that shows on some tables and not on others after an unknown
  outcome raises PartialCommitError.
- Identifiers have at least one namespace level: ``"db.events"``,
  ``("a", "b", "events")``.
"""

from __future__ import annotations

import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from stream_sink.exceptions import (
    AtomicCommitUnsupportedError,
    CommitFailedError,
    CorruptMetadataError,
    InvalidOptionError,
    MissingFileError,
    ValidationError,
)
from stream_sink.io import FileIO
from stream_sink.table.catalog.metadata_files import (
    decode_metadata,
    delete_removed_metadata,
    with_previous_file,
)
from stream_sink.table.metadata import TableMetadata, new_table_metadata, parse_metadata
from stream_sink.table.partitioning import PartitionSpec, build_partition_spec
from stream_sink.table.schema import Schema
from stream_sink.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from stream_sink.table.table import Table

if TYPE_CHECKING:
    import pyarrow as pa

Identifier = tuple[str, ...]
TableT = TypeVar("TableT", bound=Table)
TableFactory = Callable[..., TableT]


def to_identifier(name: str | Sequence[str]) -> Identifier:
    """``"db.events"`` or ``("db", "events")`` → ``("db", "events")``."""
    parts = tuple(name.split(".")) if isinstance(name, str) else tuple(name)
    if not parts or any(not p for p in parts):
        raise ValidationError(f"invalid identifier {name!r}")
    return parts


def to_namespace(name: str | Sequence[str]) -> Identifier:
    return to_identifier(name)


def table_identifier(name: str | Sequence[str]) -> Identifier:
    """Like :func:`to_identifier`, but a table needs a namespace and a name."""
    ident = to_identifier(name)
    if len(ident) < 2:
        raise ValidationError(f"table identifier {name!r} needs a namespace, e.g. 'db.{ident[0]}'")
    return ident


def part_problem(part: str) -> str | None:
    """Why ``part`` cannot be one part of an identifier whatever the catalog (Hadoop and
    SQL catalogs make each part a directory, REST servers a location), None when it can:
    it is empty, is or holds ``.`` (so ``..`` too) or ``/``, or holds a control
    character (Unicode category Cc: C0, DEL and C1)."""
    if not part:
        return "is empty"
    for ch in part:
        if ch in "./":
            return f"holds {ch!r}"
        if unicodedata.category(ch) == "Cc":
            return f"holds the control character U+{ord(ch):04X}"
    return None


def dotted(ident: Sequence[str]) -> str:
    return ".".join(ident)


@dataclass(frozen=True)
class TableCommit:
    """One table's part of a commit of several tables: the change from ``base_metadata``
    (current at ``base_location``) to ``new_metadata``. Its requirements are the
    single-table commit's: the compare-and-swap from ``base_location`` (REST: the
    ``CommitTableRequest`` requirements built from the two metadata)."""

    identifier: Identifier
    base_location: str
    base_metadata: TableMetadata
    new_metadata: TableMetadata


@dataclass(frozen=True)
class CommittedTable:
    """What one table of a commit of several became: its new metadata location and
    the metadata exactly as written."""

    identifier: Identifier
    location: str
    metadata: TableMetadata


SwapHook = Callable[[Identifier], None]


class Catalog(ABC, Generic[TableT]):
    """Base of the Hadoop and SQL catalogs; subclasses implement storage of the pointer.

    Tables it returns are made by ``table_factory(identifier, metadata,
    metadata_location, io, catalog)``: a higher layer passes a richer Table
    subclass (``stream_sink.load_catalog`` passes the one with append and scan)."""

    kind: ClassVar[str | None] = None
    """The ``type`` ``load_catalog`` opens this kind of catalog with (``hadoop``,
    ``sql``, ``rest``); None for catalogs it does not know."""

    def __init__(
        self,
        name: str,
        properties: Mapping[str, str],
        table_factory: TableFactory[TableT] | None = None,
    ) -> None:
        self.name = name
        self.properties = dict(properties)
        self._table_factory: TableFactory[TableT] = (
            table_factory if table_factory is not None else cast("TableFactory[TableT]", Table)
        )

    def close(self) -> None:
        """Release connections the catalog holds (none for file-based catalogs)."""
        return None

    # --- namespaces ---------------------------------------------------------------

    @abstractmethod
    def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None: ...

    @abstractmethod
    def list_namespaces(self, parent: str | Sequence[str] | None = None) -> list[Identifier]:
        """The direct children of ``parent`` (top-level namespaces when None)."""

    @abstractmethod
    def namespace_exists(self, namespace: str | Sequence[str]) -> bool: ...

    @abstractmethod
    def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        """NoSuchNamespaceError when absent, NamespaceNotEmptyError when it holds anything."""

    # --- tables ---------------------------------------------------------------------

    @abstractmethod
    def list_tables(self, namespace: str | Sequence[str]) -> list[Identifier]: ...

    @abstractmethod
    def table_exists(self, identifier: str | Sequence[str]) -> bool: ...

    @abstractmethod
    def default_table_location(self, identifier: Identifier) -> str: ...

    @abstractmethod
    def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> None: ...

    @abstractmethod
    def rename_table(self, source: str | Sequence[str], target: str | Sequence[str]) -> None: ...

    @abstractmethod
    def current_metadata_location(self, identifier: str | Sequence[str]) -> str:
        """The location of the table's current metadata file; NoSuchTableError when absent."""

    @abstractmethod
    def _create(self, identifier: Identifier, metadata: TableMetadata) -> str:
        """Write the first metadata file and register it; TableAlreadyExistsError on a race."""

    @abstractmethod
    def _swap(
        self,
        identifier: Identifier,
        base_location: str,
        metadata: TableMetadata,
        before_swap: Callable[[], None] = lambda: None,
    ) -> str:
        """Write ``metadata`` to a new file and make it current iff the table is still at
        ``base_location``; returns the new location (see :meth:`commit`)."""

    # --- commit -----------------------------------------------------------------------

    def commit(
        self,
        identifier: str | Sequence[str],
        base_location: str,
        new_metadata: TableMetadata,
        *,
        base_metadata: TableMetadata | None = None,
        before_swap: Callable[[], None] | None = None,
    ) -> str:
        """Swap the table from ``base_location`` to a new file holding ``new_metadata``.

        ``before_swap()`` runs once the new metadata file is written and just before
        the pointer moves (the ``after-metadata-file-write`` crash point).

        ``new_metadata`` must have been computed from the metadata at ``base_location``
        (pass it as ``base_metadata`` to spare a read). Returns the new metadata
        location. CommitFailedError when the table is no longer at ``base_location``;
        CommitStateUnknownError when the outcome is unknown.
        """
        location, _ = self.commit_metadata(
            identifier,
            base_location,
            new_metadata,
            base_metadata=base_metadata,
            before_swap=before_swap,
        )
        return location

    def commit_metadata(
        self,
        identifier: str | Sequence[str],
        base_location: str,
        new_metadata: TableMetadata,
        *,
        base_metadata: TableMetadata | None = None,
        before_swap: Callable[[], None] | None = None,
    ) -> tuple[str, TableMetadata]:
        """:meth:`commit`, also returning the metadata exactly as written (with the
        metadata-log entry for the replaced file), so callers need not re-read it."""
        ident = table_identifier(identifier)
        base = base_metadata if base_metadata is not None else self._read_base(ident, base_location)
        metadata = with_previous_file(new_metadata, base_location, base.last_updated_ms)
        location = self._swap(ident, base_location, metadata, before_swap or (lambda: None))
        delete_removed_metadata(self.io_for(location), base, base_location, metadata)
        return location, metadata

    # --- commit of several tables -------------------------------------------------------

    def multi_table_commit_problem(self) -> str | None:
        """Why this catalog cannot commit several tables atomically; None when it can."""
        return (
            f"catalog {self.name!r} ({type(self).__name__}) records each table's metadata "
            "pointer on its own and cannot move several in one step"
        )

    def commit_tables(
        self,
        commits: Sequence[TableCommit],
        *,
        before_swap: Callable[[], None] | None = None,
        after_each_swap: SwapHook | None = None,
    ) -> list[CommittedTable]:
        """Commit every table of ``commits`` atomically: all land or none does.

        ``before_swap()`` runs once every new metadata file is written (or, for a
        catalog whose server writes them, just before the request is sent);
        ``after_each_swap(identifier)`` runs inside the transaction after each table's
        pointer moved, where the catalog has such a step (SQL). Returns each table's
        result, in the order given. CommitFailedError when any table is no longer at
        its base (none landed); CommitStateUnknownError when the outcome is unknown;
        PartialCommitError when it shows on some tables only;
        AtomicCommitUnsupportedError when the catalog cannot (see
        :meth:`multi_table_commit_problem`)."""
        problem = self.multi_table_commit_problem()
        if problem is not None:
            raise AtomicCommitUnsupportedError(problem)
        parts = _distinct(commits)
        metadata = [
            with_previous_file(c.new_metadata, c.base_location, c.base_metadata.last_updated_ms)
            for c in parts
        ]
        written = [
            TableCommit(c.identifier, c.base_location, c.base_metadata, m)
            for c, m in zip(parts, metadata, strict=True)
        ]
        locations = self._swap_tables(
            written, before_swap or (lambda: None), after_each_swap or (lambda _: None)
        )
        out = []
        for c, location in zip(written, locations, strict=True):
            delete_removed_metadata(
                self.io_for(location), c.base_metadata, c.base_location, c.new_metadata
            )
            out.append(CommittedTable(c.identifier, location, c.new_metadata))
        return out

    def _swap_tables(
        self,
        commits: Sequence[TableCommit],
        before_swap: Callable[[], None],
        after_each_swap: SwapHook,
    ) -> list[str]:
        """Write each new metadata file and move every pointer in one step (see
        :meth:`commit_tables`); catalogs that offer it override this."""
        raise AtomicCommitUnsupportedError(str(self.multi_table_commit_problem()))

    def _read_base(self, ident: Identifier, base_location: str) -> TableMetadata:
        try:
            return self.read_metadata(base_location, ident)
        except MissingFileError as e:
            raise CommitFailedError(
                f"cannot commit to table {dotted(ident)}: its base metadata {base_location} "
                "no longer exists (the table has moved on); refresh and retry"
            ) from e

    # --- tables: shared behaviour -------------------------------------------------------

    def io_for(self, location: str) -> FileIO:
        return FileIO.for_location(location, self.properties)

    def create_table(
        self,
        identifier: str | Sequence[str],
        schema: Schema | pa.Schema,
        partition_spec: PartitionSpec | Sequence[tuple[Any, ...]] | None = None,
        *,
        sort_order: SortOrder | None = None,
        identifier_fields: Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
        format_version: int = 2,
    ) -> TableT:
        ident = table_identifier(identifier)
        props = dict(properties or {})
        version = table_format_version(props, format_version)
        iceberg_schema = _as_schema(schema, identifier_fields, version)
        spec = build_partition_spec(iceberg_schema, partition_spec or [])
        meta = new_table_metadata(
            iceberg_schema,
            spec,
            sort_order or UNSORTED_SORT_ORDER,
            location or self.default_table_location(ident),
            props,
            version,
        )
        meta_location = self._create(ident, meta)
        return self._table_factory(ident, meta, meta_location, self.io_for(meta.location), self)

    def load_table(self, identifier: str | Sequence[str]) -> TableT:
        ident = table_identifier(identifier)
        location = self.current_metadata_location(ident)
        meta = self.read_metadata(location, ident)
        return self._table_factory(ident, meta, location, self.io_for(meta.location), self)

    def read_metadata(
        self, location: str, identifier: Sequence[str] | None = None
    ) -> TableMetadata:
        """Parse the metadata file at ``location`` (gzip or plain JSON).

        CorruptMetadataError names the file, and the table when ``identifier`` is given.
        """
        try:
            raw = self.io_for(location).read_bytes(location)
            return parse_metadata(decode_metadata(raw, location), where=location)
        except CorruptMetadataError as e:
            if identifier is None:
                raise
            name = dotted(identifier)
            raise CorruptMetadataError(
                f"table {name}: {e}. Every reader and writer of the table fails on this file. "
                f"`stream-sink table recover {name}` lists its metadata versions; "
                f"`stream-sink table recover {name} --to-version N` shows what pointing the "
                "catalog back to version N would lose, and does it with --yes"
            ) from e


def _distinct(commits: Sequence[TableCommit]) -> list[TableCommit]:
    """``commits`` with their identifiers checked: at least one, each table once."""
    parts = [
        TableCommit(
            table_identifier(c.identifier), c.base_location, c.base_metadata, c.new_metadata
        )
        for c in commits
    ]
    if not parts:
        raise ValidationError("a commit of several tables needs at least one table")
    names = [dotted(c.identifier) for c in parts]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValidationError(f"a commit of several tables names {', '.join(twice)} twice")
    return parts


def _as_schema(
    schema: Schema | pa.Schema, identifier_fields: Sequence[str] | None, format_version: int
) -> Schema:
    if isinstance(schema, Schema):
        return schema.with_identifier_fields(identifier_fields) if identifier_fields else schema
    from stream_sink.table.arrow import schema_from_arrow

    keys = list(identifier_fields) if identifier_fields else None
    return schema_from_arrow(schema, keys, format_version)


FORMAT_VERSION_PROPERTIES = ("format-version", "write.format-version")


def table_format_version(props: dict[str, str], default: int) -> int:
    """The format version a new table gets: ``format-version`` (Iceberg's creation
    property) or ``write.format-version`` in ``props`` (both removed from it: neither
    is a table property), else ``default``. A value that is not a number is refused."""
    chosen = default
    for key in FORMAT_VERSION_PROPERTIES:
        raw = props.pop(key, None)
        if raw is None:
            continue
        try:
            chosen = int(raw)
        except ValueError:
            raise InvalidOptionError(
                f"table property {key}={raw!r} is not a format version (1, 2 or 3)"
            ) from None
    return chosen
