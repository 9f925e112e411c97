"""One table opened from a metadata file, without its catalog (pyiceberg's ``StaticTable``,
DuckDB's ``iceberg_scan``): read-only.

``static_metadata_location`` finds the file: a ``*.metadata.json`` (or gzip) file as
given; a table directory, or its ``metadata/`` directory, by its ``version-hint.text``
when it has one, else the file with the highest version in its name
(``v<N>.metadata.json``, ``<NNNNN>-<uuid>.metadata.json``).

Invariants:
- Nothing is ever written: every change (a commit, a new table or namespace, a drop, a
  rename) raises ReadOnlyTableError before any file is written, naming the metadata file
  and how to write to the table instead (through its catalog).
- The table is the state of that one file: ``refresh`` reads nothing new.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stream_sink.exceptions import CorruptMetadataError, NotFoundError, ReadOnlyTableError
from stream_sink.io import FileIO
from stream_sink.table.catalog.base import Catalog, Identifier, TableFactory, TableT, dotted
from stream_sink.table.catalog.metadata_files import decode_metadata, metadata_file_version
from stream_sink.table.metadata import TableMetadata, parse_metadata

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
_SUFFIXES = (".metadata.json", ".metadata.json.gz")


def is_metadata_file(location: str) -> bool:
    return location.rstrip("/").endswith(_SUFFIXES)


def static_metadata_location(location: str, io: FileIO) -> str:
    """The metadata file ``location`` names (see the module docstring); NotFoundError
    saying what was looked for when there is none, or when two files share the highest
    version (a commit that lost a race leaves one: name the file to read)."""
    location = location.rstrip("/")
    if is_metadata_file(location):
        if not io.exists(location):
            raise NotFoundError(f"metadata file {location} does not exist")
        return location
    directory = location if location.endswith(f"/{METADATA_DIR}") else f"{location}/{METADATA_DIR}"
    hinted = _hinted(io, directory)
    if hinted is not None:
        return hinted
    versions: dict[int, list[str]] = {}
    for entry in io.list_dir(directory):
        version = metadata_file_version(entry.rsplit("/", 1)[-1])
        if version is not None:
            versions.setdefault(version, []).append(entry)
    if not versions:
        raise NotFoundError(
            f"no Iceberg table at {location}: {directory} holds no metadata file "
            "(v<N>.metadata.json or <NNNNN>-<uuid>.metadata.json); give the path of the "
            "table's directory or of one of its metadata files"
        )
    newest = versions[max(versions)]
    if len(newest) > 1:
        raise NotFoundError(
            f"table at {location}: {len(newest)} metadata files have the highest version "
            f"{max(versions)} ({', '.join(sorted(newest))}); a commit that lost a race "
            "leaves such a file: give the path of the one the catalog points at"
        )
    return newest[0]


def _hinted(io: FileIO, directory: str) -> str | None:
    """The metadata file ``version-hint.text`` names (Hadoop tables), if it exists."""
    hint = f"{directory}/{VERSION_HINT}"
    if not io.exists(hint):
        return None
    text = io.read_bytes(hint).decode("utf-8", "replace").strip()
    if not text.isdigit():
        return None
    for suffix in (".metadata.json", ".gz.metadata.json", ".metadata.json.gz"):
        if io.exists(f"{directory}/v{text}{suffix}"):
            return f"{directory}/v{text}{suffix}"
    return None


def static_identifier(metadata: TableMetadata) -> Identifier:
    """A name for the table in messages: the last two parts of its location."""
    parts = [p for p in metadata.location.rstrip("/").split("/") if p and not p.endswith(":")]
    if len(parts) >= 2:
        return tuple(parts[-2:])
    return ("static", parts[-1] if parts else "table")


class StaticCatalog(Catalog[TableT]):
    """The read-only catalog of the one table whose metadata is at ``metadata_location``."""

    def __init__(
        self,
        metadata_location: str,
        properties: Mapping[str, str] | None = None,
        table_factory: TableFactory[TableT] | None = None,
    ) -> None:
        super().__init__("static", dict(properties or {}), table_factory)
        self.metadata_location = metadata_location

    def __repr__(self) -> str:
        return f"StaticCatalog({self.metadata_location!r})"

    def open(self) -> TableT:
        """The table (its identifier from its location, see :func:`static_identifier`)."""
        meta = self.read_metadata(self.metadata_location)
        ident = static_identifier(meta)
        io = self.io_for(meta.location)
        return self._table_factory(ident, meta, self.metadata_location, io, self)

    def read_metadata(
        self, location: str, identifier: Sequence[str] | None = None
    ) -> TableMetadata:
        try:
            raw = self.io_for(location).read_bytes(location)
            return parse_metadata(decode_metadata(raw, location), where=location)
        except CorruptMetadataError as e:
            raise CorruptMetadataError(f"{e} (the table was opened from this file)") from e

    def refuse(self, what: str) -> ReadOnlyTableError:
        return ReadOnlyTableError(
            f"cannot {what}: the table was opened from its metadata file "
            f"{self.metadata_location} (load_static_table, or a metadata file or a "
            "directory given to stream-sink), which is read-only. To write to it, open "
            "it through its catalog: stream_sink.load_catalog(...).load_table(...)"
        )

    # --- one table, read-only --------------------------------------------------------------

    def current_metadata_location(self, identifier: str | Sequence[str]) -> str:
        return self.metadata_location

    def table_exists(self, identifier: str | Sequence[str]) -> bool:
        return True

    def load_table(self, identifier: str | Sequence[str]) -> TableT:
        return self.open()

    def list_tables(self, namespace: str | Sequence[str]) -> list[Identifier]:
        return []

    def list_namespaces(self, parent: str | Sequence[str] | None = None) -> list[Identifier]:
        return []

    def namespace_exists(self, namespace: str | Sequence[str]) -> bool:
        return False

    def default_table_location(self, identifier: Identifier) -> str:
        raise self.refuse(f"create table {dotted(identifier)}")

    def commit_metadata(self, identifier: str | Sequence[str], *args: Any, **kwargs: Any) -> Any:
        raise self.refuse(f"commit to table {dotted(_parts(identifier))}")

    def create_namespace(
        self, namespace: str | Sequence[str], properties: Mapping[str, str] | None = None
    ) -> None:
        raise self.refuse(f"create namespace {dotted(_parts(namespace))}")

    def drop_namespace(self, namespace: str | Sequence[str]) -> None:
        raise self.refuse(f"drop namespace {dotted(_parts(namespace))}")

    def drop_table(self, identifier: str | Sequence[str], purge: bool = False) -> None:
        raise self.refuse(f"drop table {dotted(_parts(identifier))}")

    def rename_table(self, source: str | Sequence[str], target: str | Sequence[str]) -> None:
        raise self.refuse(f"rename table {dotted(_parts(source))}")

    def _create(self, identifier: Identifier, metadata: TableMetadata) -> str:
        raise self.refuse(f"create table {dotted(identifier)}")

    def _swap(
        self,
        identifier: Identifier,
        base_location: str,
        metadata: TableMetadata,
        before_swap: Callable[[], None] = lambda: None,
    ) -> str:
        raise self.refuse(f"commit to table {dotted(identifier)}")


def _parts(name: str | Sequence[str]) -> tuple[str, ...]:
    return tuple(name.split(".")) if isinstance(name, str) else tuple(name)
