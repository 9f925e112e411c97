"""File IO over ``pyarrow.fs``: local paths and ``s3://`` (HDFS where pyarrow has it).

Invariants:
- Locations are strings as stored in table metadata: an absolute local path
  (``/data/wh/db/t/...``, optionally ``file:`` prefixed) or a URI (``s3://bucket/key``).
- ``write_bytes(..., overwrite=False)`` never replaces an existing file silently.
- ``rename_no_replace`` is atomic and exclusive only where ``supports_atomic_rename``
  is True (local filesystems); object stores must not rely on it.
- ``put_if_absent`` is atomic and exclusive where ``supports_put_if_absent`` is True:
  locally a hard link of a fsync'd temporary file, on S3 a conditional PUT
  (``If-None-Match: *``, see :mod:`stream_sink.io.conditional_put`).
- A missing file is reported as :class:`MissingFileError` naming the location.
- With ``credentials`` (a catalog's vended, short-lived credentials) every request uses
  the current ones, renewed ahead of expiry, and a request refused for expired
  credentials is sent once more with renewed ones (:mod:`stream_sink.io.credentials`).
  Pickled, a FileIO carries its current properties, and the catalog's
  :class:`~stream_sink.io.renewal.Renewal` when it offers one: unpickled (on a Spark
  executor) it renews through that as the driver does. Without one it carries only the
  properties, and the driver keeps the means to renew them.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO, Mapping
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from stream_sink.exceptions import (
    InvalidOptionError,
    MissingFileError,
    UnsupportedError,
    UnsupportedSchemeError,
)
from stream_sink.io import conditional_put
from stream_sink.io.credentials import RefreshingCredentials, expires_at_ms
from stream_sink.io.endpoint import endpoint_parts, endpoint_url
from stream_sink.io.errors import object_store_errors
from stream_sink.io.private import PRIVATE_FILE, private_dirs
from stream_sink.io.renewal import Renewal

S3_PROPERTIES = (
    "s3.endpoint",
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "s3.region",
)


@dataclass(frozen=True)
class ListedFile:
    """A file found by :meth:`FileIO.walk`: its path relative to the walked location,
    its size and its modification time (ms; 0 when the store has none)."""

    relative: str
    size: int
    mtime_ms: int


@dataclass(frozen=True)
class FileIO:
    """Reads and writes files at locations; one instance serves one scheme."""

    scheme: str = "file"
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)  # keys: secrets
    #: renewable credentials (driver only); their current properties replace ``properties``
    credentials: RefreshingCredentials | None = field(default=None, repr=False, compare=False)

    @staticmethod
    def for_location(
        location: str,
        properties: Mapping[str, str] | None = None,
        credentials: RefreshingCredentials | None = None,
    ) -> FileIO:
        scheme = _scheme(location)
        if scheme not in _FAMILY:
            raise unsupported_scheme(location)
        return FileIO("s3" if scheme == "s3a" else scheme, _storage(properties or {}), credentials)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled with the current properties (valid, and outside the renewal margin, when
        the task was serialised) and, when the catalog offers one, its Renewal, through
        which the unpickled FileIO renews them; never with the driver's ``credentials``."""
        properties = dict(self.current_properties)
        credentials = self.credentials
        renewal = credentials.renewal() if credentials and credentials.renewal else None
        if credentials is None or renewal is None:
            return (FileIO, (self.scheme, properties))
        return (_renewing, (self.scheme, properties, renewal, credentials.received_ms))

    @property
    def current_properties(self) -> Mapping[str, str]:
        """The properties requests use now (renewed credentials when there are some)."""
        if self.credentials is None:
            return self.properties
        return _storage(self.credentials.current())

    @property
    def supports_atomic_rename(self) -> bool:
        return self.scheme == "file"

    @property
    def supports_put_if_absent(self) -> bool:
        """Local filesystems (a hard link) and S3 (a conditional PUT)."""
        return self.scheme in ("file", "s3")

    # --- the pyarrow filesystem ----------------------------------------------

    def filesystem(self) -> pafs.FileSystem:
        return _filesystem(self.scheme, tuple(sorted(self.current_properties.items())))

    def path_of(self, location: str) -> str:
        """The filesystem path for ``location`` (what pyarrow.fs calls a path); a
        location of another scheme than this FileIO serves is refused, naming it (a
        table whose files live on a store this library has no FileIO for)."""
        parsed = urlparse(location)
        if parsed.scheme and _FAMILY.get(_scheme(location)) != self.scheme:
            if _scheme(location) in _FAMILY:
                raise foreign_scheme(location, self.scheme)
            raise unsupported_scheme(location)
        if parsed.scheme in ("", "file"):
            return os.path.abspath(parsed.path if parsed.scheme else location)
        if parsed.scheme in ("s3", "s3a"):
            return f"{parsed.netloc}{parsed.path}"
        return parsed.path

    # --- reading ----------------------------------------------------------------

    @object_store_errors("reading")
    def read_bytes(self, location: str) -> bytes:
        try:
            with self.filesystem().open_input_stream(self.path_of(location)) as f:
                return bytes(f.read())
        except FileNotFoundError as e:
            raise MissingFileError(f"file not found: {location}") from e
        except OSError as e:
            if _is_not_found(e):
                raise MissingFileError(f"file not found: {location}") from e
            raise

    @object_store_errors("opening")
    def open_input(self, location: str) -> pa.NativeFile:
        """A random-access file (what Parquet readers want)."""
        try:
            return self.filesystem().open_input_file(self.path_of(location))
        except FileNotFoundError as e:
            raise MissingFileError(f"file not found: {location}") from e
        except OSError as e:
            if _is_not_found(e):
                raise MissingFileError(f"file not found: {location}") from e
            raise

    @object_store_errors("looking up")
    def exists(self, location: str) -> bool:
        info = self.filesystem().get_file_info(self.path_of(location))
        return info.type != pafs.FileType.NotFound

    @object_store_errors("looking up")
    def size(self, location: str) -> int:
        info = self.filesystem().get_file_info(self.path_of(location))
        if info.type == pafs.FileType.NotFound:
            raise MissingFileError(f"file not found: {location}")
        return int(info.size or 0)

    @object_store_errors("listing")
    def list_dir(self, location: str) -> list[str]:
        """Locations of the entries directly under ``location`` (empty when absent)."""
        selector = pafs.FileSelector(self.path_of(location), allow_not_found=True)
        base = location.rstrip("/")
        return sorted(
            f"{base}/{info.base_name}" for info in self.filesystem().get_file_info(selector)
        )

    @object_store_errors("listing")
    def walk(self, location: str) -> list[ListedFile]:
        """Every file below ``location``, recursively (none when it is absent); paths
        relative to ``location``, without directories."""
        base = self.path_of(location).rstrip("/")
        selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        return [
            ListedFile(
                info.path[len(base) :].lstrip("/"),
                int(info.size or 0),
                info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0,
            )
            for info in self.filesystem().get_file_info(selector)
            if info.type == pafs.FileType.File
        ]

    # --- writing ----------------------------------------------------------------

    @object_store_errors("creating")
    def open_output(self, location: str) -> BinaryIO:
        """A stream that creates (or replaces) ``location``; parents are made."""
        fs = self.filesystem()
        path = self.path_of(location)
        if self.scheme == "file":  # os.makedirs: one stat and one mkdir for a new leaf,
            os.makedirs(os.path.dirname(path), exist_ok=True)  # pyarrow walks from the root
        return fs.open_output_stream(path)  # type: ignore[return-value]

    @object_store_errors("writing")
    def write_bytes(self, location: str, data: bytes, *, overwrite: bool = False) -> None:
        if not overwrite and self.exists(location):
            raise FileExistsError(f"refusing to overwrite {location}")
        with self.open_output(location) as out:
            out.write(data)

    def write_atomic(
        self, location: str, data: bytes, *, fsync: bool = True, private: bool = False
    ) -> None:
        """Write so that readers see the old file or the whole new one, never a part.

        Local: temp file, fsync, rename over; ``private``: the file ``0600`` and the
        directories made for it ``0700`` (:mod:`stream_sink.io.private`). Object
        stores: a PUT is already atomic.
        """
        if self.scheme != "file":
            self.write_bytes(location, data, overwrite=True)
            return
        path = self.path_of(location)
        if private:
            private_dirs(os.path.dirname(path))
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = temporary_name(path)
        mode = PRIVATE_FILE if private else 0o666
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if fsync:
            _fsync_dir(os.path.dirname(path))

    def rename_no_replace(self, src: str, dst: str) -> bool:
        """Atomically move ``src`` to ``dst`` unless ``dst`` exists; False when it does.

        Local only (a hard link is exclusive and atomic; the source is then unlinked).
        """
        if not self.supports_atomic_rename:
            raise InvalidOptionError(
                f"{self.scheme}:// has no atomic rename; use the SQL catalog for this warehouse"
            )
        s, d = self.path_of(src), self.path_of(dst)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        try:
            os.link(s, d)
        except FileExistsError:
            return False
        os.unlink(s)
        _fsync_dir(os.path.dirname(d))
        return True

    def put_if_absent(
        self,
        location: str,
        data: bytes,
        *,
        before_publish: Callable[[], None] | None = None,
    ) -> bool:
        """Create ``location`` holding ``data`` unless it exists; False when it does
        (with other bytes: an existing file of exactly ``data`` counts as written, since
        on S3 it is this call's own PUT, retried by the client after a lost response).

        Of any number of writers of distinct bytes racing for one location exactly one
        gets True; a reader sees no file or the whole file, and an existing file is
        never replaced.
        ``before_publish`` runs before the file can become visible (locally: after its
        bytes are durable; on S3: before the PUT). Refused where
        ``supports_put_if_absent`` is False.
        """
        if self.scheme == "file":
            return self._link_if_absent(location, data, before_publish)
        if self.scheme == "s3":
            if before_publish is not None:
                before_publish()
            bucket, _, key = self.path_of(location).partition("/")
            return conditional_put.put_if_absent(
                self.current_properties, bucket, key, data, location
            )
        raise UnsupportedError(
            f"{location}: {self.scheme}:// has no atomic put-if-absent here (only local "
            "paths and s3:// have one)"
        )

    def _link_if_absent(
        self, location: str, data: bytes, before_publish: Callable[[], None] | None
    ) -> bool:
        """A fsync'd temporary file hard-linked to its name (``link`` fails when the name
        exists, and a reader never sees a partial file)."""
        final = self.path_of(location)
        directory = os.path.dirname(final)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, temporary_name(f".{os.path.basename(final)}"))
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            if before_publish is not None:
                before_publish()
            os.link(tmp, final)
        except FileExistsError:
            return self.read_bytes(location) == data
        finally:
            os.unlink(tmp)
        _fsync_dir(directory)
        return True

    @object_store_errors("creating directory")
    def mkdirs(self, location: str) -> None:
        self.filesystem().create_dir(self.path_of(location), recursive=True)

    # --- deleting ---------------------------------------------------------------

    @object_store_errors("deleting")
    def delete(self, location: str) -> None:
        """Delete a file; a missing file is not an error (deletes are idempotent)."""
        try:
            self.filesystem().delete_file(self.path_of(location))
        except FileNotFoundError:
            pass
        except OSError as e:
            if not _is_not_found(e):
                raise

    def remove_empty_dirs(
        self, location: str, older_than_ms: int, dry_run: bool = False
    ) -> list[str]:
        """Directories below ``location`` (never ``location`` itself) that hold no file at
        any depth and were last modified before ``older_than_ms``: removed deepest first
        (only listed with ``dry_run``); their local paths.

        A directory is removed with ``rmdir``, which refuses one that is not empty, so a
        file written meanwhile is never touched. Only local file systems have directories
        to remove here; object stores have none, and HDFS is left alone."""
        if self.scheme != "file":
            return []
        root = self.path_of(location).rstrip("/")
        if not os.path.isdir(root):
            return []
        empty: set[str] = set()
        order: list[str] = []
        for path, dirs, files in os.walk(root, topdown=False):
            if path == root or files or any(os.path.join(path, d) not in empty for d in dirs):
                continue
            try:
                if os.stat(path).st_mtime_ns // 1_000_000 >= older_than_ms:
                    continue
            except FileNotFoundError:
                continue
            empty.add(path)
            order.append(path)
        removed = []
        for path in order:
            try:
                if not dry_run:
                    os.rmdir(path)
            except OSError:  # no longer empty (a writer came), or already gone
                continue
            removed.append(path)
        return removed

    @object_store_errors("deleting")
    def delete_dir(self, location: str) -> None:
        try:
            self.filesystem().delete_dir(self.path_of(location))
        except FileNotFoundError:
            pass
        except OSError as e:
            if not _is_not_found(e):
                raise


_TEMPORARY = re.compile(r"\.[0-9a-f]{32}\.tmp$")


def temporary_name(name: str) -> str:
    """The name of the temporary file a local atomic write renames or links to ``name``
    (``<name>.<uuid hex>.tmp``); left behind only by a process that died mid-write."""
    return f"{name}.{uuid.uuid4().hex}.tmp"


def is_temporary(name: str) -> bool:
    """Whether ``name`` is one of :func:`temporary_name`'s."""
    return _TEMPORARY.search(name) is not None


_RENEWED: OrderedDict[Renewal, RefreshingCredentials] = OrderedDict()
"""The credentials this process renewed per Renewal (an executor's tasks unpickle the
same FileIO again and again: the next one starts from what the last one renewed)."""
_RENEWED_SIZE = 64
_RENEWED_LOCK = threading.Lock()


def _renewing(
    scheme: str, properties: dict[str, str], renewal: Renewal, received_ms: int
) -> FileIO:
    """An unpickled FileIO that renews its credentials through ``renewal``; in a process
    that already renewed them for the same Renewal (an executor's earlier task), it starts
    from the newest set."""
    with _RENEWED_LOCK:
        known = _RENEWED.get(renewal)
        if known is not None and (known.expires_at or 0) >= (expires_at_ms(properties) or 0):
            _RENEWED.move_to_end(renewal)
            return FileIO(scheme, properties, known)
        credentials = RefreshingCredentials(
            properties,
            lambda: renewal.fetch(properties),
            what=renewal.what,
            renewal=lambda: renewal,
            received_ms=received_ms,
        )
        _RENEWED[renewal] = credentials
        while len(_RENEWED) > _RENEWED_SIZE:
            _RENEWED.popitem(last=False)
    return FileIO(scheme, properties, credentials)


#: The schemes a FileIO serves, and the FileIO scheme serving each.
_FAMILY = {"file": "file", "s3": "s3", "s3a": "s3", "hdfs": "hdfs"}


def unsupported_scheme(location: str) -> UnsupportedSchemeError:
    """The error for a location no FileIO here serves, saying what would."""
    scheme = _scheme(location)
    return UnsupportedSchemeError(
        f"location {location!r}: the {scheme}:// scheme is not supported (files are read "
        "and written on file://, s3:// and s3a:// (S3 and S3-compatible stores) and "
        f"hdfs://). Reading {scheme}:// would need a FileIO for that store; until there "
        "is one, copy the table to a supported store, or reach the bucket through an "
        "S3-compatible endpoint (table property s3.endpoint) where the store offers one"
    )


def foreign_scheme(location: str, served: str) -> UnsupportedSchemeError:
    """The error for a location on a store that is supported, but not the one this
    FileIO serves (a table's files are read on its own location's store)."""
    scheme = _scheme(location)
    access = " with the s3.* properties that reach it" if _FAMILY[scheme] == "s3" else ""
    return UnsupportedSchemeError(
        f"location {location!r} is on {scheme}://, but this table's files are read on "
        f"{served}://, the store of the table's own location: a table's metadata names "
        f"its files where they were written. A table copied from {scheme}:// to {served}:// "
        f"still names them on {scheme}://: read it at its {scheme}:// location{access}, or "
        "copy it with every path rewritten to the new location (Apache Iceberg Java's "
        "rewrite_table_path procedure does that)"
    )


def _scheme(location: str) -> str:
    parsed = urlparse(location)
    if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and os.name == "nt"):
        return "file"
    return parsed.scheme


def _is_not_found(e: OSError) -> bool:
    text = str(e).lower()
    return "not found" in text or "no such file" in text or "does not exist" in text


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _storage(properties: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in properties.items() if k.startswith(("s3.", "hdfs."))}


_FS_CACHE: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], pafs.FileSystem] = OrderedDict()
_FS_CACHE_SIZE = 32  # renewed credentials make new keys: the oldest filesystems are dropped


def _filesystem(scheme: str, props: tuple[tuple[str, str], ...]) -> pafs.FileSystem:
    key = (scheme, props)
    fs = _FS_CACHE.get(key)
    if fs is None:
        fs = _make_filesystem(scheme, dict(props))
        _FS_CACHE[key] = fs
        while len(_FS_CACHE) > _FS_CACHE_SIZE:
            _FS_CACHE.popitem(last=False)
    return fs


def _make_filesystem(scheme: str, props: dict[str, str]) -> pafs.FileSystem:
    if scheme == "file":
        return pafs.LocalFileSystem()
    if scheme == "s3":
        endpoint = endpoint_url(props)
        kwargs: dict[str, object] = {
            "access_key": props.get("s3.access-key-id") or os.environ.get("AWS_ACCESS_KEY_ID"),
            "secret_key": props.get("s3.secret-access-key")
            or os.environ.get("AWS_SECRET_ACCESS_KEY"),
            "session_token": props.get("s3.session-token"),  # vended (temporary) credentials
            "region": props.get("s3.region") or os.environ.get("AWS_REGION", "us-east-1"),
        }
        if endpoint:
            kwargs["scheme"], kwargs["endpoint_override"] = endpoint_parts(endpoint)
        return pafs.S3FileSystem(**{k: v for k, v in kwargs.items() if v is not None})
    if scheme == "hdfs":
        return pafs.HadoopFileSystem("default")
    raise unsupported_scheme(f"{scheme}://")
