"""A catalog that is a directory tree, laid out exactly as Java's HadoopCatalog.

``<warehouse>/<ns>/.../<table>/metadata/v<N>.metadata.json`` plus
``metadata/version-hint.text`` holding ``N``; namespaces are directories.

Invariants:
- Version ``N+1`` exists only once: a commit writes a temp file in ``metadata/``
  and links it to ``v<N+1>`` exclusively (no replace), so of two racing writers
  exactly one wins and the other gets CommitFailedError.
- The version hint may lag (a writer can die between the rename and the hint
  update, or a racing writer's lower hint land last, which the writers' probe after
  writing repairs): readers take the hint, then probe ``v<N+1>``, ``v<N+2>``... as
  Java does.
  A failure to update the hint never fails a commit that has already renamed.
- Only local filesystems: an object store has no exclusive rename.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence

import pyarrow.fs as pafs

from stream_sink.exceptions import (
    CommitFailedError,
    InvalidOptionError,
    MissingFileError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    UnsupportedError,
)
from stream_sink.io import FileIO
from stream_sink.table.catalog.base import (
    Catalog,
    Identifier,
    TableFactory,
    TableT,
    dotted,
    table_identifier,
    to_namespace,
)
from stream_sink.table.catalog.metadata_files import encode_metadata, metadata_suffix
from stream_sink.table.metadata import TableMetadata

log = logging.getLogger(__name__)

VERSION_HINT = "version-hint.text"
_VERSION_FILE = re.compile(r"^v(\d+)(?:\.gz)?\.metadata\.json(?:\.gz)?$")
_SUFFIXES = (".metadata.json", ".gz.metadata.json", ".metadata.json.gz")


class HadoopCatalog(Catalog[TableT]):
    kind = "hadoop"

    def __init__(
        self,
        name: str,
        warehouse: str,
        properties: Mapping[str, str] | None = None,
        table_factory: TableFactory[TableT] | None = None,
    ) -> None:
        self.warehouse = _local_warehouse(warehouse)
        super().__init__(name, {**(properties or {}), "warehouse": self.warehouse}, table_factory)
        self.io = FileIO.for_location(self.warehouse, self.properties)
        self.io.mkdirs(self.warehouse)

    def __repr__(self) -> str:
        return f"HadoopCatalog({self.name!r}, warehouse={self.warehouse!r})"

    # --- paths --------------------------------------------------------------------

    def _path(self, parts: Sequence[str]) -> str:
        return "/".join([self.warehouse, *parts])

    def default_table_location(self, identifier: Identifier) -> str:
        return self._path(identifier)

    def _metadata_dir(self, ident: Identifier) -> str:
        return f"{self._path(ident)}/metadata"

    def _is_dir(self, location: str) -> bool:
        info = self.io.filesystem().get_file_info(self.io.path_of(location))
        return bool(info.type == pafs.FileType.Directory)

    def _subdirs(self, location: str) -> list[str]:
        selector = pafs.FileSelector(self.io.path_of(location), allow_not_found=True)
        infos = self.io.filesystem().get_file_info(selector)
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)

    # --- versions -----------------------------------------------------------------

    def _version_file(self, metadata_dir: str, version: int) -> str | None:
        for suffix in _SUFFIXES:
            location = f"{metadata_dir}/v{version}{suffix}"
            if self.io.exists(location):
                return location
        return None

    def _read_hint(self, metadata_dir: str) -> int | None:
        try:
            text = self.io.read_bytes(f"{metadata_dir}/{VERSION_HINT}").decode("utf-8")
            return int(text.strip().splitlines()[0])
        except (MissingFileError, OSError, ValueError, IndexError, UnicodeDecodeError):
            return None

    def _listed_max_version(self, metadata_dir: str) -> int | None:
        versions = [
            int(m.group(1))
            for name in self.io.list_dir(metadata_dir)
            if (m := _VERSION_FILE.match(name.rsplit("/", 1)[-1]))
        ]
        return max(versions, default=None)

    def _current(self, ident: Identifier) -> tuple[int, str] | None:
        """(version, location) of the newest metadata file, or None when not a table."""
        metadata_dir = self._metadata_dir(ident)
        version = self._read_hint(metadata_dir)
        location = self._version_file(metadata_dir, version) if version else None
        if location is None:
            version = self._listed_max_version(metadata_dir)
            if version is None:
                return None
            location = self._version_file(metadata_dir, version)
        assert version is not None and location is not None
        while (newer := self._version_file(metadata_dir, version + 1)) is not None:
            version, location = version + 1, newer
        return version, location

    def _write_hint(self, ident: Identifier, version: int) -> None:
        """Point the hint at ``version``, then at any newer version found after writing it.

        Two committers racing each write their own version, and the lower one may land
        last; probing after the write makes the last writer leave the newest version it
        can see (a writer that commits after the probe writes its own hint later still),
        so the hint ends at the newest version once commits stop. A lagging hint only
        costs readers a probe or two."""
        metadata_dir = self._metadata_dir(ident)
        hint = f"{metadata_dir}/{VERSION_HINT}"
        try:
            while True:
                self.io.write_atomic(hint, str(version).encode())
                newest = version
                while self._version_file(metadata_dir, newest + 1) is not None:
                    newest += 1
                if newest == version:
                    return
                version = newest
        except OSError as e:
            log.warning(
                "table %s: could not update %s to %d: %s", dotted(ident), VERSION_HINT, version, e
            )

    # --- namespaces -----------------------------------------------------------------

    def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        ns = to_namespace(namespace)
        if properties:
            raise UnsupportedError(
                f"cannot create namespace {dotted(ns)} with properties: the Hadoop catalog "
                "stores none (use the SQL catalog)"
            )
        if self._is_dir(self._path(ns)):
            raise NamespaceAlreadyExistsError(
                f"namespace {dotted(ns)} already exists in catalog {self.name!r}"
            )
        self.io.mkdirs(self._path(ns))

    def list_namespaces(self, parent: str | Sequence[str] | None = None) -> list[Identifier]:
        base: Identifier = to_namespace(parent) if parent else ()
        if base and not self.namespace_exists(base):
            raise self._no_namespace(base)
        children = [(*base, name) for name in self._subdirs(self._path(base))]
        return [c for c in children if self._current(c) is None]

    def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        ns = to_namespace(namespace)
        return self._is_dir(self._path(ns)) and self._current(ns) is None

    def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        ns = to_namespace(namespace)
        if not self.namespace_exists(ns):
            raise self._no_namespace(ns)
        if self.io.list_dir(self._path(ns)):
            raise NamespaceNotEmptyError(
                f"namespace {dotted(ns)} in catalog {self.name!r} is not empty: "
                f"{', '.join(self.io.list_dir(self._path(ns))[:5])}"
            )
        self.io.delete_dir(self._path(ns))

    def _no_namespace(self, ns: Identifier) -> NoSuchNamespaceError:
        return NoSuchNamespaceError(
            f"namespace {dotted(ns)} does not exist in catalog {self.name!r} "
            f"(no directory {self._path(ns)})"
        )

    # --- tables -----------------------------------------------------------------------

    def list_tables(self, namespace: str | Sequence[str]) -> list[Identifier]:
        ns = to_namespace(namespace)
        if not self.namespace_exists(ns):
            raise self._no_namespace(ns)
        children = [(*ns, name) for name in self._subdirs(self._path(ns))]
        return [c for c in children if self._current(c) is not None]

    def table_exists(self, identifier: str | Sequence[str]) -> bool:
        return self._current(table_identifier(identifier)) is not None

    def current_metadata_location(self, identifier: str | Sequence[str]) -> str:
        ident = table_identifier(identifier)
        current = self._current(ident)
        if current is None:
            raise NoSuchTableError(
                f"table {dotted(ident)} does not exist in catalog {self.name!r} "
                f"(no metadata under {self._metadata_dir(ident)})"
            )
        return current[1]

    def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> None:
        """Remove the table's directory (as Java's HadoopCatalog does, with or without
        ``purge``: the directory is the table)."""
        ident = table_identifier(identifier)
        self.current_metadata_location(ident)
        self.io.delete_dir(self._path(ident))

    def rename_table(self, source: str | Sequence[str], target: str | Sequence[str]) -> None:
        raise UnsupportedError(
            f"cannot rename {dotted(to_namespace(source))}: the Hadoop catalog does not support "
            "renaming tables (paths are part of the table); use the SQL catalog"
        )

    # --- create and commit --------------------------------------------------------------

    def _create(self, identifier: Identifier, metadata: TableMetadata) -> str:
        ns, name = identifier[:-1], dotted(identifier)
        if not self.namespace_exists(ns):
            raise self._no_namespace(ns)
        default = self.default_table_location(identifier)
        if _normalize(metadata.location) != _normalize(default):
            raise InvalidOptionError(
                f"cannot create table {name} at {metadata.location}: the Hadoop catalog "
                f"places tables at <warehouse>/<namespace>/<table> ({default})"
            )
        if self._current(identifier) is not None:
            raise TableAlreadyExistsError(f"table {name} already exists in catalog {self.name!r}")
        if self._is_dir(default) and self.io.list_dir(default):
            raise TableAlreadyExistsError(
                f"cannot create table {name}: {default} is a non-empty namespace directory"
            )
        location = self._install(identifier, 1, metadata)
        if location is None:
            raise TableAlreadyExistsError(f"table {name} was created concurrently")
        self._write_hint(identifier, 1)
        return location

    def _swap(
        self,
        identifier: Identifier,
        base_location: str,
        metadata: TableMetadata,
        before_swap: Callable[[], None] = lambda: None,
    ) -> str:
        name = dotted(identifier)
        current = self._current(identifier)
        if current is None:
            raise NoSuchTableError(f"table {name} does not exist in catalog {self.name!r}")
        version, current_location = current
        if _normalize(current_location) != _normalize(base_location):
            raise CommitFailedError(
                f"cannot commit to table {name}: it is at {current_location}, "
                f"not at the base {base_location}; refresh and retry"
            )
        location = self._install(identifier, version + 1, metadata, before_swap)
        if location is None:
            raise CommitFailedError(
                f"cannot commit to table {name}: version {version + 1} was committed "
                "concurrently; refresh and retry"
            )
        self._write_hint(identifier, version + 1)
        return location

    def _install(
        self,
        ident: Identifier,
        version: int,
        metadata: TableMetadata,
        before_swap: Callable[[], None] = lambda: None,
    ) -> str | None:
        """Write ``metadata`` as version ``version``; None when that version exists."""
        metadata_dir = self._metadata_dir(ident)
        suffix = metadata_suffix(metadata)
        final = f"{metadata_dir}/v{version}{suffix}"
        if self._version_file(metadata_dir, version) is not None:
            return None
        data = encode_metadata(metadata)
        temp = f"{metadata_dir}/{uuid.uuid4()}{suffix}"
        _write_synced(self.io.path_of(temp), data)
        before_swap()
        try:
            installed = self.io.rename_no_replace(temp, final)
        except OSError:
            # the link may have happened before the error (then our bytes are at ``final``)
            if not self.io.exists(final):
                self.io.delete(temp)
                raise
            installed = self.io.read_bytes(final) == data
        self.io.delete(temp)
        return final if installed else None


def _local_warehouse(warehouse: str) -> str:
    if not warehouse:
        raise InvalidOptionError("the Hadoop catalog needs a warehouse directory")
    if not FileIO.for_location(warehouse).supports_atomic_rename:
        raise InvalidOptionError(
            f"the Hadoop catalog cannot use warehouse {warehouse!r}: it commits by exclusive "
            "rename, which object stores and HDFS here do not offer; use the SQL catalog "
            "(type='sql', uri='sqlite:///...' or 'postgresql://...') or a REST catalog "
            "(type='rest', uri='https://...') for this warehouse"
        )
    return _normalize(warehouse)


def _normalize(location: str) -> str:
    """Plain absolute local path for ``location`` (``file:`` URIs and relative paths)."""
    return FileIO().path_of(location).rstrip("/") or "/"


def _write_synced(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
