"""A catalog in a SQL database, in the Iceberg JDBC catalog's schema.

Java's JdbcCatalog (V1 schema) and pyiceberg's SqlCatalog open the same
database: ``iceberg_tables`` holds one row per table pointing at its current
metadata file, ``iceberg_namespace_properties`` one row per namespace property.
SQLite is the embedded choice, PostgreSQL the one for real deployments.

Invariants:
- A commit is one ``UPDATE ... WHERE metadata_location = <base>``: exactly one of
  any number of racing writers matches the row; the others see 0 rows and get
  CommitFailedError, and their new metadata file is deleted.
- When the database connection fails after the UPDATE may have been sent, the
  outcome is read back: our file is current → success; otherwise
  CommitStateUnknownError and the file is kept (on PostgreSQL the transaction may
  still land). SQLite fails in-process, so there a failure is a CommitFailedError.
- A commit of several tables (``commit_tables``) writes every new metadata file first,
  then runs one ``UPDATE ... WHERE metadata_location = <base>`` per table in ONE
  database transaction: a table that matches no row rolls the whole transaction back
  (CommitFailedError naming it, every new file deleted), so a reader sees all the
  tables move or none. A connection failure while it commits is settled by reading
  every pointer back: all ours → success, none → CommitStateUnknownError (PostgreSQL)
  with the files kept, some → PartialCommitError.
- A namespace exists when it has property rows or holds a table, or when a
  namespace below it does (as in Java's JdbcCatalog).
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Engine,
    MetaData,
    String,
    and_,
    create_engine,
    delete,
    insert,
    inspect,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy import Table as SqlTable
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import (
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)

from stream_sink.exceptions import (
    CommitFailedError,
    CommitStateUnknownError,
    CorruptMetadataError,
    InvalidOptionError,
    MissingFileError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    PartialCommitError,
    TableAlreadyExistsError,
)
from stream_sink.secrets import without_passwords
from stream_sink.table.catalog.base import (
    Catalog,
    Identifier,
    SwapHook,
    TableCommit,
    TableFactory,
    TableT,
    dotted,
    table_identifier,
    to_namespace,
)
from stream_sink.table.catalog.metadata_files import encode_metadata, metadata_suffix
from stream_sink.table.catalog.purge import purge_table_files
from stream_sink.table.metadata import TableMetadata

log = logging.getLogger(__name__)

TABLE_TYPE = "TABLE"
NAMESPACE_EXISTS_PROPERTY = "exists"
SQLITE_BUSY_TIMEOUT_MS = "sqlite.busy-timeout-ms"
_VERSION_PREFIX = re.compile(r"^(\d+)-")

_SCHEMA = MetaData()
ICEBERG_TABLES = SqlTable(
    "iceberg_tables",
    _SCHEMA,
    Column("catalog_name", String(255), nullable=False, primary_key=True),
    Column("table_namespace", String(255), nullable=False, primary_key=True),
    Column("table_name", String(255), nullable=False, primary_key=True),
    Column("metadata_location", String(1000), nullable=True),
    Column("previous_metadata_location", String(1000), nullable=True),
    Column("iceberg_type", String(5), nullable=True),
)
NAMESPACE_PROPERTIES = SqlTable(
    "iceberg_namespace_properties",
    _SCHEMA,
    Column("catalog_name", String(255), nullable=False, primary_key=True),
    Column("namespace", String(255), nullable=False, primary_key=True),
    Column("property_key", String(255), nullable=False, primary_key=True),
    Column("property_value", String(1000), nullable=True),
)
_T = ICEBERG_TABLES.c
_N = NAMESPACE_PROPERTIES.c


class SqlCatalog(Catalog[TableT]):
    kind = "sql"

    def __init__(
        self,
        name: str,
        uri: str,
        warehouse: str | None = None,
        properties: Mapping[str, str] | None = None,
        table_factory: TableFactory[TableT] | None = None,
    ) -> None:
        props = dict(properties or {})
        self.warehouse = _warehouse(warehouse) if warehouse else None
        if self.warehouse:
            props["warehouse"] = self.warehouse
        super().__init__(name, {**props, "uri": uri}, table_factory)
        self.url = engine_url(uri, props)
        self.engine = make_engine(self.url, props)
        self._typed = _ensure_schema(self.engine)

    def __repr__(self) -> str:
        shown = without_passwords(self.url.render_as_string(hide_password=True))
        return f"SqlCatalog({self.name!r}, {shown!r})"

    def close(self) -> None:
        self.engine.dispose()

    # --- row selection ------------------------------------------------------------------

    def _table_row(self, ident: Identifier) -> ColumnElement[bool]:
        cond = and_(
            _T.catalog_name == self.name,
            _T.table_namespace == dotted(ident[:-1]),
            _T.table_name == ident[-1],
        )
        return and_(cond, self._tables_only()) if self._typed else cond

    def _tables_only(self) -> ColumnElement[bool]:
        return or_(_T.iceberg_type == TABLE_TYPE, _T.iceberg_type.is_(None))

    def _lookup(self, ident: Identifier) -> str | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(_T.metadata_location).where(self._table_row(ident))).first()
        return None if row is None else row[0]

    # --- namespaces ---------------------------------------------------------------------

    def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        ns = to_namespace(namespace)
        if self.namespace_exists(ns):
            raise NamespaceAlreadyExistsError(
                f"namespace {dotted(ns)} already exists in catalog {self.name!r}"
            )
        given = {str(k): str(v) for k, v in (properties or {}).items()}
        props = {NAMESPACE_EXISTS_PROPERTY: "true", **given}
        rows = [
            {
                "catalog_name": self.name,
                "namespace": dotted(ns),
                "property_key": k,
                "property_value": v,
            }
            for k, v in props.items()
        ]
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(NAMESPACE_PROPERTIES), rows)
        except IntegrityError as e:
            raise NamespaceAlreadyExistsError(
                f"namespace {dotted(ns)} was created concurrently in catalog {self.name!r}"
            ) from e

    def _all_namespaces(self, conn: Connection) -> set[Identifier]:
        from_props = select(_N.namespace).where(_N.catalog_name == self.name).distinct()
        from_tables = select(_T.table_namespace).where(_T.catalog_name == self.name).distinct()
        names = {r[0] for r in conn.execute(from_props)} | {r[0] for r in conn.execute(from_tables)}
        return {tuple(n.split(".")) for n in names if n}

    def list_namespaces(self, parent: str | Sequence[str] | None = None) -> list[Identifier]:
        base: Identifier = to_namespace(parent) if parent else ()
        with self.engine.connect() as conn:
            every = self._all_namespaces(conn)
        if base and not any(ns[: len(base)] == base for ns in every):
            raise self._no_namespace(base)
        depth = len(base) + 1
        return sorted({ns[:depth] for ns in every if len(ns) >= depth and ns[: len(base)] == base})

    def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        name = dotted(to_namespace(namespace))
        below = _like_prefix(name)
        props = select(literal(1)).where(
            _N.catalog_name == self.name,
            or_(_N.namespace == name, _N.namespace.like(below, escape="\\")),
        )
        tables = select(literal(1)).where(
            _T.catalog_name == self.name,
            or_(_T.table_namespace == name, _T.table_namespace.like(below, escape="\\")),
        )
        with self.engine.connect() as conn:
            return any(conn.execute(q.limit(1)).first() is not None for q in (props, tables))

    def load_namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:
        ns = to_namespace(namespace)
        if not self.namespace_exists(ns):
            raise self._no_namespace(ns)
        query = select(_N.property_key, _N.property_value).where(
            _N.catalog_name == self.name, _N.namespace == dotted(ns)
        )
        with self.engine.connect() as conn:
            return {k: v for k, v in conn.execute(query) if v is not None}

    def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        ns = to_namespace(namespace)
        if not self.namespace_exists(ns):
            raise self._no_namespace(ns)
        tables = self.list_tables(ns)
        children = self.list_namespaces(ns)
        if tables or children:
            held = [dotted(t) for t in tables] + [dotted(c) for c in children]
            raise NamespaceNotEmptyError(
                f"namespace {dotted(ns)} in catalog {self.name!r} is not empty: "
                f"{', '.join(held[:5])}"
            )
        with self.engine.begin() as conn:
            conn.execute(
                delete(NAMESPACE_PROPERTIES).where(
                    _N.catalog_name == self.name, _N.namespace == dotted(ns)
                )
            )

    def _no_namespace(self, ns: Identifier) -> NoSuchNamespaceError:
        return NoSuchNamespaceError(
            f"namespace {dotted(ns)} does not exist in catalog {self.name!r}"
        )

    # --- tables ---------------------------------------------------------------------------

    def list_tables(self, namespace: str | Sequence[str]) -> list[Identifier]:
        ns = to_namespace(namespace)
        if not self.namespace_exists(ns):
            raise self._no_namespace(ns)
        query = select(_T.table_name).where(
            _T.catalog_name == self.name, _T.table_namespace == dotted(ns)
        )
        if self._typed:
            query = query.where(self._tables_only())
        with self.engine.connect() as conn:
            return sorted((*ns, r[0]) for r in conn.execute(query))

    def table_exists(self, identifier: str | Sequence[str]) -> bool:
        return self._lookup(table_identifier(identifier)) is not None

    def current_metadata_location(self, identifier: str | Sequence[str]) -> str:
        ident = table_identifier(identifier)
        location = self._lookup(ident)
        if location is None:
            raise self._no_table(ident)
        return location

    def default_table_location(self, identifier: Identifier) -> str:
        if not self.warehouse:
            raise InvalidOptionError(
                f"catalog {self.name!r} has no warehouse: pass warehouse= to load_catalog "
                f"or location= to create_table for {dotted(identifier)}"
            )
        return "/".join([self.warehouse, *identifier])

    def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> None:
        """Unregister the table; ``purge`` also deletes the files its metadata reaches
        and its directories under its location (:mod:`.purge`)."""
        ident = table_identifier(identifier)
        location = self.current_metadata_location(ident)
        metadata = self.read_metadata(location, ident) if purge else None
        with self.engine.begin() as conn:
            deleted = conn.execute(delete(ICEBERG_TABLES).where(self._table_row(ident))).rowcount
        if deleted == 0:
            raise self._no_table(ident)
        if metadata is not None:
            purge_table_files(self.io_for, location, metadata, self._old_metadata(ident))

    def _old_metadata(self, ident: Identifier) -> Callable[[str], TableMetadata | None]:
        def read(location: str) -> TableMetadata | None:
            try:
                return self.read_metadata(location, ident)
            except (MissingFileError, CorruptMetadataError):
                return None

        return read

    def rename_table(self, source: str | Sequence[str], target: str | Sequence[str]) -> None:
        src, dst = table_identifier(source), table_identifier(target)
        if not self.namespace_exists(dst[:-1]):
            raise self._no_namespace(dst[:-1])
        if self.table_exists(dst):
            raise TableAlreadyExistsError(
                f"cannot rename {dotted(src)} to {dotted(dst)}: it already exists"
            )
        stmt = (
            update(ICEBERG_TABLES)
            .where(self._table_row(src))
            .values(table_namespace=dotted(dst[:-1]), table_name=dst[-1])
        )
        try:
            with self.engine.begin() as conn:
                renamed = conn.execute(stmt).rowcount
        except IntegrityError as e:
            raise TableAlreadyExistsError(
                f"cannot rename {dotted(src)} to {dotted(dst)}: it already exists"
            ) from e
        if renamed == 0:
            raise self._no_table(src)

    def _no_table(self, ident: Identifier) -> NoSuchTableError:
        return NoSuchTableError(f"table {dotted(ident)} does not exist in catalog {self.name!r}")

    # --- create and commit ------------------------------------------------------------------

    def _new_metadata_location(self, metadata: TableMetadata, version: int) -> str:
        default = f"{metadata.location}/metadata"
        directory = metadata.properties.get("write.metadata.path", default).rstrip("/")
        return f"{directory}/{version:05d}-{uuid.uuid4()}{metadata_suffix(metadata)}"

    def _create(self, identifier: Identifier, metadata: TableMetadata) -> str:
        ns = identifier[:-1]
        if not self.namespace_exists(ns):
            raise self._no_namespace(ns)
        if self.table_exists(identifier):
            raise TableAlreadyExistsError(
                f"table {dotted(identifier)} already exists in catalog {self.name!r}"
            )
        location = self._new_metadata_location(metadata, 0)
        io = self.io_for(location)
        io.write_atomic(location, encode_metadata(metadata))
        row: dict[str, Any] = {
            "catalog_name": self.name,
            "table_namespace": dotted(ns),
            "table_name": identifier[-1],
            "metadata_location": location,
            "previous_metadata_location": None,
        }
        if self._typed:
            row["iceberg_type"] = TABLE_TYPE
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(ICEBERG_TABLES).values(**row))
        except IntegrityError as e:
            io.delete(location)
            raise TableAlreadyExistsError(
                f"table {dotted(identifier)} was created concurrently in catalog {self.name!r}"
            ) from e
        return location

    def _swap(
        self,
        identifier: Identifier,
        base_location: str,
        metadata: TableMetadata,
        before_swap: Callable[[], None] = lambda: None,
    ) -> str:
        name = dotted(identifier)
        new_location = self._new_metadata_location(metadata, _version_of(base_location) + 1)
        io = self.io_for(new_location)
        io.write_atomic(new_location, encode_metadata(metadata))
        before_swap()
        stmt = (
            update(ICEBERG_TABLES)
            .where(self._table_row(identifier), _T.metadata_location == base_location)
            .values(metadata_location=new_location, previous_metadata_location=base_location)
        )
        try:
            conn = self.engine.connect()
        except SQLAlchemyError as e:
            io.delete(new_location)
            raise CommitFailedError(
                f"cannot commit to table {name}: catalog database unreachable: {e}"
            ) from e
        try:
            with conn:
                updated = conn.execute(stmt).rowcount
                conn.commit()
        except DBAPIError as e:
            return self._after_error(identifier, base_location, new_location, e)
        if updated == 1:
            return new_location
        io.delete(new_location)
        current = self._lookup(identifier)
        if current is None:
            raise self._no_table(identifier)
        raise CommitFailedError(
            f"cannot commit to table {name}: it is at {current}, not at the base "
            f"{base_location}; refresh and retry"
        )

    def _after_error(
        self, ident: Identifier, base_location: str, new_location: str, error: DBAPIError
    ) -> str:
        """Settle a commit whose UPDATE raised: success, failed, or unknown."""
        name = dotted(ident)
        sent = isinstance(error, (OperationalError, InterfaceError)) or error.connection_invalidated
        in_process = self.url.get_backend_name() == "sqlite"
        if sent and not in_process:
            try:
                current = self._lookup(ident)
            except SQLAlchemyError as check_error:
                raise CommitStateUnknownError(
                    f"commit to table {name} may or may not have landed ({error}); reading the "
                    f"catalog back failed too ({check_error}); {new_location} is kept"
                ) from error
            if current == new_location:
                return new_location
            raise CommitStateUnknownError(
                f"commit to table {name} may or may not have landed: the connection failed "
                f"({error}); {new_location} is kept; reload the table before retrying"
            ) from error
        self.io_for(new_location).delete(new_location)
        raise CommitFailedError(
            f"cannot commit to table {name}: the catalog database refused the update: {error}"
        ) from error

    # --- commit of several tables ---------------------------------------------------------

    def multi_table_commit_problem(self) -> str | None:
        return None

    def _swap_tables(
        self,
        commits: Sequence[TableCommit],
        before_swap: Callable[[], None],
        after_each_swap: SwapHook,
    ) -> list[str]:
        """Every table's pointer swapped in one database transaction (module invariants)."""
        locations = [self._write_next(c.base_location, c.new_metadata) for c in commits]
        before_swap()
        try:
            conn = self.engine.connect()
        except SQLAlchemyError as e:
            self._delete_all(locations)
            raise CommitFailedError(
                f"cannot commit to tables {_names(commits)}: catalog database unreachable: {e}"
            ) from e
        try:
            with conn:
                missed = self._update_all(conn, commits, locations, after_each_swap)
                if missed is None:
                    conn.commit()
                else:
                    conn.rollback()
        except DBAPIError as e:
            return self._after_tables_error(commits, locations, e)
        except BaseException:
            self._delete_all(locations)
            raise
        if missed is None:
            return locations
        self._delete_all(locations)
        raise self._lost(missed)

    def _write_next(self, base_location: str, metadata: TableMetadata) -> str:
        location = self._new_metadata_location(metadata, _version_of(base_location) + 1)
        self.io_for(location).write_atomic(location, encode_metadata(metadata))
        return location

    def _update_all(
        self,
        conn: Connection,
        commits: Sequence[TableCommit],
        locations: Sequence[str],
        after_each_swap: SwapHook,
    ) -> TableCommit | None:
        """Run each table's UPDATE in ``conn``'s transaction; the first table that no
        longer is at its base (nothing committed yet), or None when every one matched."""
        for c, location in zip(commits, locations, strict=True):
            stmt = (
                update(ICEBERG_TABLES)
                .where(self._table_row(c.identifier), _T.metadata_location == c.base_location)
                .values(metadata_location=location, previous_metadata_location=c.base_location)
            )
            if conn.execute(stmt).rowcount != 1:
                return c
            after_each_swap(c.identifier)
        return None

    def _lost(self, missed: TableCommit) -> Exception:
        current = self._lookup(missed.identifier)
        if current is None:
            return self._no_table(missed.identifier)
        return CommitFailedError(
            f"cannot commit to table {dotted(missed.identifier)}: it is at {current}, not at "
            f"the base {missed.base_location}; no table of the commit moved; refresh and retry"
        )

    def _delete_all(self, locations: Sequence[str]) -> None:
        for location in locations:
            self.io_for(location).delete(location)

    def _after_tables_error(
        self, commits: Sequence[TableCommit], locations: list[str], error: DBAPIError
    ) -> list[str]:
        """Settle a transaction whose statements or COMMIT raised: success, failed,
        unknown, or (never from one transaction) partial."""
        sent = isinstance(error, (OperationalError, InterfaceError)) or error.connection_invalidated
        if not sent or self.url.get_backend_name() == "sqlite":
            self._delete_all(locations)
            raise CommitFailedError(
                f"cannot commit to tables {_names(commits)}: the catalog database refused "
                f"the update: {error}"
            ) from error
        try:
            current = [self._lookup(c.identifier) for c in commits]
        except SQLAlchemyError as check_error:
            raise CommitStateUnknownError(
                f"commit to tables {_names(commits)} may or may not have landed ({error}); "
                f"reading the catalog back failed too ({check_error}); the new metadata "
                "files are kept"
            ) from error
        landed = [
            c for c, now, ours in zip(commits, current, locations, strict=True) if now == ours
        ]
        if len(landed) == len(commits):
            return locations
        if not landed:
            raise CommitStateUnknownError(
                f"commit to tables {_names(commits)} may or may not have landed: the "
                f"connection failed ({error}); the new metadata files are kept; reload the "
                "tables before retrying"
            ) from error
        raise PartialCommitError(
            f"the commit of tables {_names(commits)} was one transaction, yet it shows on "
            f"{_names(landed)} only (the connection failed: {error}); look at the tables "
            "before writing to them again"
        ) from error


def _names(commits: Sequence[TableCommit]) -> str:
    return ", ".join(dotted(c.identifier) for c in commits)


# --- engine --------------------------------------------------------------------------------


def engine_url(uri: str, properties: Mapping[str, str] | None = None) -> URL:
    """SQLAlchemy URL for a catalog ``uri``: ``sqlite:///path.db``, ``postgresql://...``
    (psycopg 3), also with a ``jdbc:`` prefix; ``jdbc.user``/``jdbc.password`` fill in
    credentials."""
    props = properties or {}
    text = uri[len("jdbc:") :] if uri.startswith("jdbc:") else uri
    if text.startswith("sqlite:") and not text.startswith("sqlite://"):
        text = "sqlite:///" + text[len("sqlite:") :]
    for plain in ("postgresql://", "postgres://"):
        if text.startswith(plain):
            text = "postgresql+psycopg://" + text[len(plain) :]
    try:
        url = make_url(text)
    except SQLAlchemyError as e:
        raise InvalidOptionError(f"catalog uri {uri!r} is not a database URL: {e}") from e
    if props.get("jdbc.user"):
        url = url.set(username=props["jdbc.user"])
    if props.get("jdbc.password"):
        url = url.set(password=props["jdbc.password"])
    return url


def make_engine(url: URL, properties: Mapping[str, str] | None = None) -> Engine:
    props = properties or {}
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            os.makedirs(os.path.dirname(os.path.abspath(database)), exist_ok=True)
        timeout_ms = int(props.get(SQLITE_BUSY_TIMEOUT_MS, "60000"))
        return create_engine(url, connect_args={"timeout": timeout_ms / 1000})
    return create_engine(url, pool_pre_ping=True)


def _ensure_schema(engine: Engine) -> bool:
    """Create the catalog tables when missing; True when ``iceberg_type`` exists (V1)."""
    for attempt in range(3):
        try:
            _SCHEMA.create_all(engine, checkfirst=True)
            break
        except SQLAlchemyError:
            # another process created one of them between the check and the create
            if attempt == 2:
                raise
    columns = {c["name"] for c in inspect(engine).get_columns(ICEBERG_TABLES.name)}
    return "iceberg_type" in columns


def _warehouse(warehouse: str) -> str:
    if "://" in warehouse:
        return warehouse.rstrip("/")
    path = warehouse[len("file:") :] if warehouse.startswith("file:") else warehouse
    return os.path.abspath(path).rstrip("/") or "/"


def _like_prefix(name: str) -> str:
    escaped = name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + ".%"


def _version_of(location: str) -> int:
    """The version counter at the start of a ``%05d-<uuid>`` file name; -1 when absent."""
    match = _VERSION_PREFIX.match(location.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else -1
