"""The ``_delta_log`` directory: listing versions, reading and writing commit files.

Invariants:
- A commit file ``%020d.json`` is written put-if-absent (:meth:`FileIO.put_if_absent`):
  of two writers racing for the same version exactly one wins, the other gets False and
  must rebase on the winning commits. Locally this is a fsync'd temporary file
  hard-linked to its final name; on S3 a PUT with ``If-None-Match: *`` (a 412 means the
  version exists). Stores without such a primitive are refused before anything is
  written (see :func:`check_store` and :func:`open_io`).
- Everything else in the log is read and written through the same FileIO (listing,
  commits, checkpoints, ``_last_checkpoint``), so a table on ``s3://`` is read as one
  on a local path.
- Reading a version that is not valid JSON lines raises CorruptMetadataError naming the
  version, so a torn or garbage file is never half-applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from stream_sink.exceptions import CorruptMetadataError, InvalidOptionError, MissingFileError
from stream_sink.io.fileio import FileIO

from .actions import Action, action_to_json, parse_action
from .paths import absolute_location

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
SUPPORTED_SCHEMES = ("", "file", "s3", "s3a", "hdfs")
"""Where a Delta table can be read; writing needs put-if-absent (see :func:`check_store`)."""
WRITABLE = "a local or shared POSIX path, or s3:// (a PUT with If-None-Match: *)"


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


_UUID_CHECKPOINT = re.compile(r"^checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")
_PART_CHECKPOINT = re.compile(r"^checkpoint\.(\d{10})\.(\d{10})\.parquet$")
SIDECARS = "_sidecars"


@dataclass(frozen=True)
class LogListing:
    """One listing of ``_delta_log``: commit versions (ascending) and the checkpoint file
    names of each checkpointed version."""

    commits: list[int]
    checkpoints: dict[int, tuple[str, ...]] = field(default_factory=dict)


class DeltaLog:
    """One table's ``_delta_log`` under ``location`` (a table root, no trailing slash)."""

    def __init__(
        self,
        location: str,
        io: FileIO | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.location = location.rstrip("/")
        self.io = io or open_io(self.location, storage_options)
        self.log_dir = f"{self.location}/{LOG_DIR}"

    def commit_path(self, version: int) -> str:
        return f"{self.log_dir}/{commit_name(version)}"

    def checkpoint_path(self, version: int) -> str:
        return f"{self.log_dir}/{checkpoint_name(version)}"

    def sidecar_path(self, path: str) -> str:
        """Where a V2 checkpoint's sidecar reference points (a bare name in ``_sidecars``)."""
        return absolute_location(f"{self.log_dir}/{SIDECARS}", path)

    def exists(self) -> bool:
        commits, checkpoints = self.list_versions()
        return bool(commits) or bool(checkpoints)

    def list_versions(self) -> tuple[list[int], list[int]]:
        """Versions of the commit files and of the checkpoints present, each ascending,
        from one listing of the log (one LIST request on an object store)."""
        listing = self.list_log()
        return listing.commits, sorted(listing.checkpoints)

    def list_log(self) -> LogListing:
        """Commit versions and, per version, the checkpoint files a reader may use:
        UUID-named (V2) first, then classic, then a complete multi-part one."""
        commits: list[int] = []
        uuid_named: dict[int, tuple[str, ...]] = {}
        classic: dict[int, tuple[str, ...]] = {}
        parts: dict[tuple[int, int], list[str]] = {}
        for name in self._names():
            stem, _, ext = name.partition(".")
            if len(stem) != 20 or not stem.isdigit():
                continue
            version = int(stem)
            if ext == "json":
                commits.append(version)
            elif ext == "checkpoint.parquet":
                classic[version] = (name,)
            elif _UUID_CHECKPOINT.match(ext):
                uuid_named.setdefault(version, (name,))
            elif m := _PART_CHECKPOINT.match(ext):
                parts.setdefault((version, int(m.group(2))), []).append(name)
        checkpoints = dict(classic)
        for (version, total), names in parts.items():
            if len(set(names)) == total and version not in checkpoints:
                checkpoints[version] = tuple(sorted(names))
        checkpoints.update(uuid_named)
        return LogListing(sorted(commits), checkpoints)

    def _names(self) -> list[str]:
        return [p.rsplit("/", 1)[-1] for p in self.io.list_dir(self.log_dir)]

    def list_commits(self) -> list[int]:
        """Versions of the commit files present, ascending."""
        return self.list_versions()[0]

    def list_checkpoints(self) -> list[int]:
        """Versions of single-file checkpoints present, ascending."""
        return self.list_versions()[1]

    def read_commit(self, version: int) -> list[Action]:
        """The actions of version ``version``, in file order."""
        where = f"Delta table {self.location}, version {version} ({commit_name(version)})"
        try:
            raw = self.io.read_bytes(self.commit_path(version))
        except MissingFileError:
            raise MissingFileError(f"{where}: the commit file is missing") from None
        actions: list[Action] = []
        for n, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError) as e:
                raise CorruptMetadataError(
                    f"{where}: line {n} is not JSON ({e}); the file is torn or garbage. "
                    "Restore it from a backup or remove the versions from this one on"
                ) from None
            if not isinstance(doc, dict):
                raise CorruptMetadataError(f"{where}: line {n} is not a JSON object")
            action = parse_action(doc, where=f"{where}, line {n}")
            if action is not None:
                actions.append(action)
        return actions

    def write_commit(
        self,
        version: int,
        actions: Sequence[Action],
        before_publish: Callable[[], None] | None = None,
    ) -> bool:
        """Write ``version`` put-if-absent; False when another writer won that version.

        ``before_publish`` runs after the file's bytes are durable and before it becomes
        visible (a failpoint boundary)."""
        check_store(self.io, self.location)
        data = "".join(
            json.dumps(action_to_json(a), separators=(",", ":")) + "\n" for a in actions
        ).encode("utf-8")
        return self.io.put_if_absent(self.commit_path(version), data, before_publish=before_publish)

    def read_last_checkpoint(self) -> dict[str, Any] | None:
        """``_last_checkpoint`` as a dict; None when absent or unreadable (it is a hint)."""
        try:
            raw = self.io.read_bytes(f"{self.log_dir}/{LAST_CHECKPOINT}")
            doc = json.loads(raw)
            return doc if isinstance(doc, dict) and isinstance(doc.get("version"), int) else None
        except (MissingFileError, ValueError, RecursionError):
            return None

    def write_last_checkpoint(self, version: int, size: int, num_add_files: int) -> None:
        """Point ``_last_checkpoint`` at a checkpoint: a plain overwrite (see
        :func:`~stream_sink.delta.checkpoint.write_checkpoint` for why that is safe)."""
        doc = {"version": version, "size": size, "numOfAddFiles": num_add_files}
        self.io.write_atomic(f"{self.log_dir}/{LAST_CHECKPOINT}", json.dumps(doc).encode())


def open_io(location: str, storage_options: Mapping[str, str] | None = None) -> FileIO:
    """The FileIO of a Delta table at ``location``; ``storage_options`` are FileIO
    properties (``s3.endpoint``, ``s3.access-key-id``, ``s3.secret-access-key``,
    ``s3.region``). Schemes without put-if-absent here are refused naming why."""
    scheme = urlparse(location).scheme
    if len(scheme) > 1 and scheme not in SUPPORTED_SCHEMES:
        raise InvalidOptionError(
            f"Delta table {location}: {scheme}:// is not supported. Every Delta commit "
            "creates its _delta_log version file put-if-absent, so that of two writers "
            f"only one wins a version; that exists here only for {WRITABLE}"
        )
    unknown = sorted(k for k in storage_options or {} if not k.startswith(("s3.", "hdfs.")))
    if unknown:
        raise InvalidOptionError(
            f"Delta table {location}: unknown storage options {unknown}; they are FileIO "
            "properties: s3.endpoint, s3.access-key-id, s3.secret-access-key, s3.region"
        )
    return FileIO.for_location(location, storage_options)


def check_store(io: FileIO, location: str) -> None:
    """Refuse writes where the FileIO has no atomic put-if-absent (e.g. HDFS here)."""
    if not io.supports_put_if_absent:
        raise InvalidOptionError(
            f"Delta table {location}: {io.scheme}:// has no put-if-absent here, so two "
            f"writers could both write the same version; write Delta tables on {WRITABLE}"
        )
