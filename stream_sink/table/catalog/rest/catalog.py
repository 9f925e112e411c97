"""A catalog behind the Iceberg REST protocol (Polaris, Unity, Glue and S3 Tables, Nessie,
Lakekeeper, Gravitino, SeaweedFS, Apache Iceberg's own server).

Invariants:
- The server owns the metadata files: creating a table and every commit are requests,
  and the server writes the new metadata file. A commit is one ``CommitTableRequest``
  built by :func:`~stream_sink.table.catalog.rest.changes.table_changes` from the base
  metadata and the wanted one, with requirements that make it land only on the base.
- 409 is a lost race (CommitFailedError: refresh, validate again, retry). 5xx, timeouts
  and dropped connections leave the outcome unknown: the table is read back, and the
  commit counts as landed when its added snapshots are in the table and its refs point
  at them (or, for a commit without snapshots, its property values are there); otherwise
  CommitStateUnknownError, and nothing the commit referenced is deleted.
- A commit of several tables is one ``POST /v1/{prefix}/transactions/commit`` carrying
  each table's ``CommitTableRequest`` (built as for one table) under an
  ``Idempotency-Key``; offered when ``/v1/config`` lists that endpoint or, from a
  server that lists no endpoints, until it answers 404/405/501 (then never again).
  Every failed answer is settled by reading every table back: 409 → CommitFailedError
  when no table shows the commit; 5xx and lost answers → success when all show it,
  CommitStateUnknownError when none does; some showing it and others not →
  PartialCommitError (the server was not atomic: reported, never papered over).
- Tables are read through the FileIO configured from the catalog's properties, overlaid
  with the load result's ``config`` and the longest matching ``storage-credentials``
  prefix (vended credentials, endpoints).
- Vended credentials with an expiry (``s3.session-token-expires-at-ms``) are renewed by
  the table's FileIO (:mod:`stream_sink.io.credentials`): from the credentials endpoint
  when the load result names one (``client.refresh-credentials-endpoint``, as Iceberg
  Java's ``VendedCredentialsProvider`` does), else from the table's ``loadCredentials``
  endpoint when ``/v1/config`` lists it (Nessie serves it without naming it), else by
  loading the table again, which vends new ones. Each renewal is logged at INFO with
  its source. ``client.refresh-credentials-enabled=false`` turns renewal off.
- A table's FileIO pickled for Spark's executors carries a
  :class:`~stream_sink.io.renewal.Renewal`: the same request in the same order (named
  endpoint, ``loadCredentials``, table load), with the headers
  :meth:`~stream_sink.table.catalog.rest.client.RestClient.executor_headers` allows; none
  when those would need a long-lived secret (then executors renew nothing).
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stream_sink.exceptions import (
    AtomicCommitUnsupportedError,
    CatalogRequestError,
    CatalogUnavailableError,
    CommitFailedError,
    CommitStateUnknownError,
    InvalidOptionError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    PartialCommitError,
    TableAlreadyExistsError,
    UnsupportedError,
)
from stream_sink.io import FileIO
from stream_sink.io.credentials import (
    REFRESH_ENABLED,
    REFRESH_ENDPOINT,
    RefreshingCredentials,
    is_vended,
)
from stream_sink.io.renewal import Answer, Renewal, answer_properties, storage_credentials
from stream_sink.secrets import without_passwords
from stream_sink.table.catalog.base import (
    Catalog,
    CommittedTable,
    Identifier,
    SwapHook,
    TableCommit,
    TableFactory,
    TableT,
    _as_schema,
    dotted,
    table_format_version,
    table_identifier,
    to_namespace,
)
from stream_sink.table.catalog.rest.changes import TableChanges, table_changes
from stream_sink.table.catalog.rest.client import LOAD_CREDENTIALS, RestClient
from stream_sink.table.metadata import TableMetadata, parse_metadata
from stream_sink.table.partitioning import PartitionSpec, build_partition_spec
from stream_sink.table.schema import Schema, check_types_for_version
from stream_sink.table.sorting import UNSORTED_SORT_ORDER, SortOrder

log = logging.getLogger(__name__)

_CACHE = 64
_UNKNOWN_STATUS = frozenset({500, 502, 503, 504})
_NO_ENDPOINT = frozenset({404, 405, 501})
COMMIT_TRANSACTION = "POST /v1/{prefix}/transactions/commit"
"""The REST spec's ``commitTransaction``, as a server lists it in ``/v1/config``."""


class RestCatalog(Catalog[TableT]):
    kind = "rest"

    def __init__(
        self,
        name: str,
        uri: str,
        warehouse: str | None = None,
        properties: Mapping[str, str] | None = None,
        table_factory: TableFactory[TableT] | None = None,
    ) -> None:
        props = {**dict(properties or {}), "uri": uri}
        if warehouse:
            props["warehouse"] = warehouse
        self.client = RestClient(name, props)
        super().__init__(name, self.client.properties, table_factory)
        self._metadata: OrderedDict[str, TableMetadata] = OrderedDict()
        self._storage: dict[str, dict[str, str]] = {}
        self._no_transactions: str | None = None

    def __repr__(self) -> str:
        return f"RestCatalog({self.name!r}, {without_passwords(self.client.uri)!r})"

    def close(self) -> None:
        self.client.close()

    # --- paths ---------------------------------------------------------------------------

    def _ns(self, ns: Identifier) -> str:
        return f"namespaces/{self.client.namespace_path(ns)}"

    def _table(self, ident: Identifier) -> str:
        from urllib.parse import quote

        return f"{self._ns(ident[:-1])}/tables/{quote(ident[-1], safe='')}"

    # --- namespaces ---------------------------------------------------------------------

    def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        ns = to_namespace(namespace)
        body = {
            "namespace": list(ns),
            "properties": {str(k): str(v) for k, v in (properties or {}).items()},
        }
        try:
            self.client.request(
                "POST", "namespaces", body=body, what=f"create namespace {dotted(ns)}"
            )
        except CatalogRequestError as e:
            if e.status == 409:
                raise NamespaceAlreadyExistsError(
                    f"namespace {dotted(ns)} already exists in catalog {self.name!r}"
                ) from None
            raise

    def list_namespaces(self, parent: str | Sequence[str] | None = None) -> list[Identifier]:
        base: Identifier = to_namespace(parent) if parent else ()
        params = {"parent": self.client.namespace_path(base)} if base else {}
        try:
            pages = self._pages(
                "namespaces",
                "namespaces",
                params,
                f"list namespaces under {dotted(base) or 'the root'}",
            )
        except CatalogRequestError as e:
            if e.status == 404:
                raise self._no_namespace(base) from None
            raise
        return sorted(tuple(n) for n in pages)

    def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        ns = to_namespace(namespace)
        try:
            self.client.request("GET", self._ns(ns), what=f"load namespace {dotted(ns)}")
            return True
        except CatalogRequestError as e:
            if e.status == 404:
                return False
            raise

    def load_namespace_properties(self, namespace: str | Sequence[str]) -> dict[str, str]:
        ns = to_namespace(namespace)
        try:
            resp = self.client.request("GET", self._ns(ns), what=f"load namespace {dotted(ns)}")
        except CatalogRequestError as e:
            if e.status == 404:
                raise self._no_namespace(ns) from None
            raise
        return {str(k): str(v) for k, v in (resp.body or {}).get("properties", {}).items()}

    def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        ns = to_namespace(namespace)
        try:
            self.client.request("DELETE", self._ns(ns), what=f"drop namespace {dotted(ns)}")
        except CatalogRequestError as e:
            if e.status == 404:
                raise self._no_namespace(ns) from None
            if e.status == 409:
                raise NamespaceNotEmptyError(
                    f"namespace {dotted(ns)} in catalog {self.name!r} is not empty: "
                    f"{e.server_message}"
                ) from None
            raise

    def _no_namespace(self, ns: Identifier) -> NoSuchNamespaceError:
        return NoSuchNamespaceError(
            f"namespace {dotted(ns)} does not exist in catalog {self.name!r}"
        )

    def _pages(self, path: str, key: str, params: Mapping[str, str], what: str) -> list[Any]:
        out: list[Any] = []
        query = dict(params)
        while True:
            resp = self.client.request("GET", path, params=query, what=what)
            body = resp.body or {}
            out.extend(body.get(key) or [])
            token = body.get("next-page-token")
            if not token:
                return out
            query["pageToken"] = str(token)

    # --- tables ---------------------------------------------------------------------------

    def list_tables(self, namespace: str | Sequence[str]) -> list[Identifier]:
        ns = to_namespace(namespace)
        try:
            found = self._pages(
                f"{self._ns(ns)}/tables", "identifiers", {}, f"list tables in {dotted(ns)}"
            )
        except CatalogRequestError as e:
            if e.status == 404:
                raise self._no_namespace(ns) from None
            raise
        if not found and not self.namespace_exists(ns):  # some servers list nothing instead
            raise self._no_namespace(ns)
        return sorted((*i["namespace"], i["name"]) for i in found)

    def table_exists(self, identifier: str | Sequence[str]) -> bool:
        try:
            self._load(table_identifier(identifier))
            return True
        except NoSuchTableError:
            return False

    def default_table_location(self, identifier: Identifier) -> str:
        warehouse = self.properties.get("warehouse", "")
        if "://" not in warehouse:
            raise InvalidOptionError(
                f"catalog {self.name!r}: the server chooses table locations; pass location= "
                f"to create_table for {dotted(identifier)} to choose one"
            )
        return "/".join([warehouse.rstrip("/"), *identifier])

    def current_metadata_location(self, identifier: str | Sequence[str]) -> str:
        location, _ = self._load(table_identifier(identifier))
        return location

    def read_metadata(
        self, location: str, identifier: Sequence[str] | None = None
    ) -> TableMetadata:
        cached = self._metadata.get(location)
        if cached is not None:
            return cached
        return super().read_metadata(location, identifier)

    def load_table(self, identifier: str | Sequence[str]) -> TableT:
        ident = table_identifier(identifier)
        location, meta = self._load(ident)
        return self._table_factory(ident, meta, location, self.io_for(meta.location, ident), self)

    def _load(self, ident: Identifier) -> tuple[str, TableMetadata]:
        try:
            resp = self.client.request(
                "GET", self._table(ident), what=f"load table {dotted(ident)}"
            )
        except CatalogRequestError as e:
            if e.status == 404:
                raise NoSuchTableError(
                    f"table {dotted(ident)} does not exist in catalog {self.name!r}"
                ) from None
            raise
        return self._adopt(resp.body, ident)

    def _adopt(
        self, body: Any, ident: Identifier, *, loaded: bool = True
    ) -> tuple[str, TableMetadata]:
        """Remember a LoadTableResult (``loaded``) or a CommitTableResponse: the metadata,
        and from a LoadTableResult the storage config. A CommitTableResponse carries no
        config and leaves the table's as it was (its vended credentials stay in use)."""
        location = str(body.get("metadata-location") or "")
        meta = parse_metadata(
            json.dumps(body["metadata"]), where=f"catalog {self.name!r} table {dotted(ident)}"
        )
        self._metadata[location] = meta
        self._metadata.move_to_end(location)
        while len(self._metadata) > _CACHE:
            self._metadata.popitem(last=False)
        if not loaded:
            return location, meta
        config = answer_properties(body, "table", meta.location)
        if config or meta.location in self._storage:
            self._storage[meta.location] = config
        return location, meta

    def io_for(self, location: str, identifier: Identifier | None = None) -> FileIO:
        """The FileIO for files under ``location``; given the table's ``identifier``, one
        that renews vended credentials before they expire (see the module's invariants)."""
        props = self._storage_properties(location)
        renew = props.get(REFRESH_ENABLED, "true").strip().lower() != "false"
        if identifier is None or not renew or not is_vended(props):
            return FileIO.for_location(location, props)
        credentials = RefreshingCredentials(
            props,
            functools.partial(self._renew_credentials, identifier, location),
            what=f"catalog {self.name!r} table {dotted(identifier)}",
            renewal=functools.partial(self._executor_renewal, identifier, location),
        )
        return FileIO.for_location(location, props, credentials)

    def _storage_properties(self, location: str) -> dict[str, str]:
        props = dict(self.properties)
        match = max((p for p in self._storage if location.startswith(p)), key=len, default=None)
        if match is not None:
            props.update(self._storage[match])
        return props

    def _executor_renewal(self, ident: Identifier, location: str) -> Renewal | None:
        """The request with which an executor renews the credentials of the table at
        ``location``, asked in the order ``_renew_credentials`` asks; None when it would
        need a long-lived secret (see the module's invariants)."""
        headers = self.client.executor_headers()
        if headers is None:
            return None
        named = self._storage_properties(location).get(REFRESH_ENDPOINT)
        answer: Answer = "credentials"
        if named:
            url = self.client.resolve(named)
        elif self.client.supports(LOAD_CREDENTIALS):
            url = self.client.url(f"{self._table(ident)}/credentials")
        else:
            url, answer = self.client.url(self._table(ident)), "table"
        return Renewal(
            url,
            answer,
            location,
            what=f"catalog {self.name!r} table {dotted(ident)}",
            headers=tuple(sorted(headers.items())),
            timeout_s=self.client.timeout_s,
            origin=self.client.uri,
        )

    def _renew_credentials(self, ident: Identifier, location: str) -> dict[str, str]:
        """Storage properties with new credentials for the table at ``location``: from
        the credentials endpoint the load result names, else from the server's
        ``loadCredentials`` when it lists that endpoint, else by loading the table again."""
        what = f"load credentials of {dotted(ident)}"
        named = self._storage_properties(location).get(REFRESH_ENDPOINT)
        if named or self.client.supports(LOAD_CREDENTIALS):
            if named:
                resp = self.client.request("GET", "", absolute=named, what=what)
            else:
                resp = self.client.request("GET", f"{self._table(ident)}/credentials", what=what)
            fresh = storage_credentials(resp.body, location)
            if fresh:
                self._storage[location] = {**self._storage.get(location, {}), **fresh}
                log.info(
                    "catalog %r: new storage credentials for %s from the credentials endpoint (%s)",
                    self.name,
                    dotted(ident),
                    "named by the table's load result" if named else "loadCredentials",
                )
                return self._storage_properties(location)
            log.warning(
                "catalog %r: the credentials endpoint of %s returned none for %s; loading "
                "the table instead",
                self.name,
                dotted(ident),
                location,
            )
        self._load(ident)  # a table load vends new credentials
        log.info(
            "catalog %r: new storage credentials for %s from a table load",
            self.name,
            dotted(ident),
        )
        return self._storage_properties(location)

    def create_table(
        self,
        identifier: str | Sequence[str],
        schema: Schema | Any,
        partition_spec: PartitionSpec | Sequence[tuple[Any, ...]] | None = None,
        *,
        sort_order: SortOrder | None = None,
        identifier_fields: Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        location: str | None = None,
        format_version: int = 2,
    ) -> TableT:
        ident = table_identifier(identifier)
        props = {str(k): str(v) for k, v in (properties or {}).items()}
        version = table_format_version(props, format_version)
        props["format-version"] = str(version)
        iceberg_schema = _as_schema(schema, identifier_fields, version)
        check_types_for_version(iceberg_schema, version, dotted(ident))
        spec = build_partition_spec(iceberg_schema, partition_spec or [])
        body: dict[str, Any] = {
            "name": ident[-1],
            "schema": iceberg_schema.to_json(),
            "partition-spec": spec.to_json(),
            "write-order": (sort_order or UNSORTED_SORT_ORDER).to_json(),
            "properties": props,
            "stage-create": False,
        }
        if location:
            body["location"] = location
        if self.table_exists(ident):  # some servers answer a create of an existing table
            raise TableAlreadyExistsError(  # with that table instead of 409
                f"table {dotted(ident)} already exists in catalog {self.name!r}"
            )
        try:
            resp = self.client.request(
                "POST",
                f"{self._ns(ident[:-1])}/tables",
                body=body,
                what=f"create table {dotted(ident)}",
            )
        except CatalogRequestError as e:
            if e.status == 409:
                raise TableAlreadyExistsError(
                    f"table {dotted(ident)} already exists in catalog {self.name!r}"
                ) from None
            if e.status == 404:
                raise self._no_namespace(ident[:-1]) from None
            raise
        meta_location, meta = self._adopt(resp.body, ident)
        return self._table_factory(
            ident, meta, meta_location, self.io_for(meta.location, ident), self
        )

    def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> None:
        ident = table_identifier(identifier)
        try:
            self.client.request(
                "DELETE",
                self._table(ident),
                params={"purgeRequested": "true" if purge else "false"},
                what=f"drop table {dotted(ident)}",
            )
        except CatalogRequestError as e:
            if e.status == 404:
                raise NoSuchTableError(
                    f"table {dotted(ident)} does not exist in catalog {self.name!r}"
                ) from None
            raise

    def rename_table(self, source: str | Sequence[str], target: str | Sequence[str]) -> None:
        src, dst = table_identifier(source), table_identifier(target)
        body = {
            "source": {"namespace": list(src[:-1]), "name": src[-1]},
            "destination": {"namespace": list(dst[:-1]), "name": dst[-1]},
        }
        try:
            self.client.request(
                "POST", "tables/rename", body=body, what=f"rename {dotted(src)} to {dotted(dst)}"
            )
        except CatalogRequestError as e:
            if e.status == 409:
                raise TableAlreadyExistsError(
                    f"cannot rename {dotted(src)} to {dotted(dst)}: it already exists"
                ) from None
            if e.status == 404:
                raise NoSuchTableError(
                    f"cannot rename {dotted(src)} to {dotted(dst)}: {e.server_message}"
                ) from None
            raise

    # --- commit ------------------------------------------------------------------------------

    def _create(self, identifier: Identifier, metadata: TableMetadata) -> str:
        raise UnsupportedError("a REST catalog creates tables on the server (create_table)")

    def _swap(
        self,
        identifier: Identifier,
        base_location: str,
        metadata: TableMetadata,
        before_swap: Callable[[], None] = lambda: None,
    ) -> str:
        raise UnsupportedError("a REST catalog commits updates, not metadata files")

    def commit_metadata(
        self,
        identifier: str | Sequence[str],
        base_location: str,
        new_metadata: TableMetadata,
        *,
        base_metadata: TableMetadata | None = None,
        before_swap: Callable[[], None] | None = None,
    ) -> tuple[str, TableMetadata]:
        """Send the change from the base to ``new_metadata`` as one CommitTableRequest;
        returns the server's new metadata location and metadata (see the module invariants)."""
        ident = table_identifier(identifier)
        base = (
            base_metadata if base_metadata is not None else self.read_metadata(base_location, ident)
        )
        changes = table_changes(base, new_metadata)
        if not changes.updates:
            return base_location, base
        if before_swap is not None:
            before_swap()
        body = {
            "identifier": {"namespace": list(ident[:-1]), "name": ident[-1]},
            **changes.to_json(),
        }
        headers = self.client.idempotency_headers()
        what = f"commit to table {dotted(ident)}"
        try:
            resp = self.client.request(
                "POST",
                self._table(ident),
                body=body,
                what=what,
                retry=bool(headers),
                headers=headers,
            )
        except CatalogRequestError as e:
            if e.status == 409 and headers:
                # sent more than once under an Idempotency-Key: a server that does not
                # honour the key may refuse our own applied commit; look before retrying
                return self._resolve_conflict(ident, changes, e)
            if e.status == 409:
                raise CommitFailedError(
                    f"cannot commit to table {dotted(ident)}: a requirement failed on the server "
                    f"(409 {e.error_type}: {e.server_message}); refresh and retry"
                ) from None
            if e.status == 404:
                raise NoSuchTableError(
                    f"table {dotted(ident)} does not exist in catalog {self.name!r}"
                ) from None
            if e.status in _UNKNOWN_STATUS or e.status >= 500:
                return self._resolve(
                    ident, changes, f"{e.status} {e.error_type}: {e.server_message}"
                )
            if e.status == 400:
                raise CatalogRequestError(
                    f"catalog {self.name!r} refused the commit to table {dotted(ident)} as "
                    f"invalid (400 {e.error_type}: {e.server_message}); it carried the updates "
                    f"{_actions(changes.updates)} and requirements {_types(changes.requirements)}: "
                    "the server may not support one of them",
                    status=400,
                    error_type=e.error_type,
                    server_message=e.server_message,
                ) from None
            raise
        except CatalogUnavailableError as e:
            return self._resolve(ident, changes, str(e))
        return self._adopt(resp.body, ident, loaded=False)

    # --- commit of several tables ---------------------------------------------------------

    def multi_table_commit_problem(self) -> str | None:
        if self._no_transactions is not None:
            return self._no_transactions
        if self.client.endpoints and not self.client.supports(COMMIT_TRANSACTION):
            return (
                f"REST catalog {self.name!r} does not list {COMMIT_TRANSACTION} among the "
                "endpoints of its /v1/config"
            )
        return None

    def commit_tables(
        self,
        commits: Sequence[TableCommit],
        *,
        before_swap: Callable[[], None] | None = None,
        after_each_swap: SwapHook | None = None,
    ) -> list[CommittedTable]:
        """One ``transactions/commit`` of every table's CommitTableRequest (see the
        module's invariants); the tables are read back for their new metadata."""
        problem = self.multi_table_commit_problem()
        if problem is not None:
            raise AtomicCommitUnsupportedError(problem)
        parts = [(table_identifier(c.identifier), c) for c in commits]
        changes = [(i, table_changes(c.base_metadata, c.new_metadata)) for i, c in parts]
        moving = [(i, ch) for i, ch in changes if ch.updates]
        if before_swap is not None:
            before_swap()
        if moving:
            self._send_transaction(moving)
        out = []
        for ident, c in parts:
            if any(i == ident for i, _ in moving):
                location, meta = self._load(ident)
            else:
                location, meta = c.base_location, c.base_metadata
            out.append(CommittedTable(ident, location, meta))
        return out

    def _send_transaction(self, changes: list[tuple[Identifier, TableChanges]]) -> None:
        body = {
            "table-changes": [
                {"identifier": {"namespace": list(i[:-1]), "name": i[-1]}, **ch.to_json()}
                for i, ch in changes
            ]
        }
        names = ", ".join(dotted(i) for i, _ in changes)
        key = self.client.idempotency_headers() or {"Idempotency-Key": str(uuid.uuid4())}
        try:
            self.client.request(
                "POST",
                "transactions/commit",
                body=body,
                what=f"commit to tables {names}",
                retry=self.client.idempotency,
                headers=key,
            )
        except CatalogRequestError as e:
            self._transaction_refused(changes, e)
        except CatalogUnavailableError as e:
            self._settle_tables(changes, str(e))

    def _transaction_refused(
        self, changes: list[tuple[Identifier, TableChanges]], e: CatalogRequestError
    ) -> None:
        names = ", ".join(dotted(i) for i, _ in changes)
        said = f"{e.status} {e.error_type}: {e.server_message}"
        if e.status == 404 and "NoSuchTable" in (e.error_type or ""):
            raise NoSuchTableError(f"commit to tables {names}: {said}") from None
        if e.status in _NO_ENDPOINT and not self.client.endpoints:
            self._no_transactions = (
                f"REST catalog {self.name!r} answered {said} to transactions/commit"
            )
            raise AtomicCommitUnsupportedError(self._no_transactions) from None
        if e.status == 409:
            lost = CommitFailedError(
                f"cannot commit to tables {names}: a requirement failed on the server "
                f"({said}); no table moved; refresh and retry"
            )
            # read back even so: the request may have been sent twice (Idempotency-Key),
            # and a server that validates every table first and then commits them one by
            # one (Apache Iceberg's CatalogHandlers) can answer 409 with some applied
            self._settle_tables(changes, said, not_landed=lost)
            return
        if e.status == 404:
            raise NoSuchTableError(f"commit to tables {names}: {said}") from None
        if e.status >= 500:
            self._settle_tables(changes, said)
            return
        raise e

    def _settle_tables(
        self,
        changes: list[tuple[Identifier, TableChanges]],
        cause: str,
        not_landed: CommitFailedError | None = None,
    ) -> None:
        """After an unknown outcome: read every table back; all landed returns, none
        raises ``not_landed`` or CommitStateUnknownError, some raises PartialCommitError."""
        names = ", ".join(dotted(i) for i, _ in changes)
        landed: list[str] = []
        missing: list[str] = []
        for ident, ch in changes:
            try:
                _, meta = self._load(ident)
            except Exception as e:
                raise CommitStateUnknownError(
                    f"commit to tables {names} may or may not have landed ({cause}); reading "
                    f"table {dotted(ident)} back failed too ({type(e).__name__}: {e}). Nothing "
                    "was deleted; reload the tables before retrying"
                ) from None
            (landed if _landed(meta, ch) else missing).append(dotted(ident))
        if not missing:
            log.warning(
                "catalog %r: commit to %s answered %s, but every table shows it landed",
                self.name,
                names,
                cause,
            )
            return
        if landed:
            raise PartialCommitError(
                f"catalog {self.name!r}: the atomic commit to tables {names} ({cause}) shows "
                f"on {', '.join(landed)} but not on {', '.join(missing)}: the server did not "
                "apply it atomically. Nothing was deleted; look at the tables before writing "
                "to them again"
            )
        if not_landed is not None:
            raise not_landed
        raise CommitStateUnknownError(
            f"commit to tables {names} may or may not have landed ({cause}); no table shows "
            "it yet. Nothing was deleted; reload the tables before retrying"
        )

    def _resolve_conflict(
        self, ident: Identifier, changes: TableChanges, error: CatalogRequestError
    ) -> tuple[str, TableMetadata]:
        """A 409 after a commit that may have been sent twice: landed, or lost the race.
        Not in the table: the requirement failed because another writer moved it, so no
        copy of this request can land any more (a table never moves back)."""
        said = f"409 {error.error_type}: {error.server_message}"
        lost = CommitFailedError(
            f"cannot commit to table {dotted(ident)}: a requirement failed on the server "
            f"({said}); refresh and retry"
        )
        return self._resolve(ident, changes, said, not_landed=lost)

    def _resolve(
        self,
        ident: Identifier,
        changes: TableChanges,
        cause: str,
        not_landed: CommitFailedError | None = None,
    ) -> tuple[str, TableMetadata]:
        """After an unknown outcome: read the table back and decide whether the commit landed."""
        try:
            location, meta = self._load(ident)
        except Exception as e:
            raise CommitStateUnknownError(
                f"commit to table {dotted(ident)} may or may not have landed ({cause}); reading "
                f"the table back failed too ({type(e).__name__}: {e}). Nothing was deleted; "
                "reload the table before retrying"
            ) from None
        if _landed(meta, changes):
            log.warning(
                "catalog %r: commit to %s answered %s, but the table shows it landed",
                self.name,
                dotted(ident),
                cause,
            )
            return location, meta
        if not_landed is not None:
            raise not_landed
        raise CommitStateUnknownError(
            f"commit to table {dotted(ident)} may or may not have landed ({cause}); the table "
            f"does not show it yet. Nothing was deleted; reload the table before retrying"
        )


def _landed(meta: TableMetadata, changes: TableChanges) -> bool:
    added = changes.added_snapshot_ids
    if added:
        # snapshot ids are random 63-bit numbers: only this commit can have added them
        return all(meta.has_snapshot(s) for s in added)
    sets = [u for u in changes.updates if u["action"] == "set-properties"]
    if sets and len(sets) == len(changes.updates):
        return all(meta.properties.get(k) == v for u in sets for k, v in u["updates"].items())
    return False


def _actions(updates: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({str(u["action"]) for u in updates})


def _types(requirements: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({str(r["type"]) for r in requirements})
