"""The ``_delta_log`` directory: listing versions, reading and writing commit files.

Invariants:
- A commit file ``%020d.json`` is written put-if-absent: of two writers racing for the
  same version exactly one wins, the other gets False and must rebase. Locally this is
  a fsync'd temporary file hard-linked to its final name (``link`` fails when the name
  exists, and a reader never sees a partial file). Object stores have no such primitive
  in pyarrow; they are refused (see :func:`check_store`).
- Reading a version that is not valid JSON lines raises CorruptMetadataError naming the
  version, so a torn or garbage file is never half-applied.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from stream_sink.exceptions import CorruptMetadataError, InvalidOptionError, MissingFileError
from stream_sink.io.fileio import FileIO

from .actions import Action, action_to_json, parse_action

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


class DeltaLog:
    """One table's ``_delta_log`` under ``location`` (a table root, no trailing slash)."""

    def __init__(self, location: str, io: FileIO | None = None) -> None:
        self.location = location.rstrip("/")
        self.io = io or FileIO.for_location(self.location)
        self.log_dir = f"{self.location}/{LOG_DIR}"

    def commit_path(self, version: int) -> str:
        return f"{self.log_dir}/{commit_name(version)}"

    def checkpoint_path(self, version: int) -> str:
        return f"{self.log_dir}/{checkpoint_name(version)}"

    def exists(self) -> bool:
        return bool(self.list_commits()) or bool(self.list_checkpoints())

    def _names(self) -> list[str]:
        return [p.rsplit("/", 1)[-1] for p in self.io.list_dir(self.log_dir)]

    def list_commits(self) -> list[int]:
        """Versions of the commit files present, ascending."""
        out = []
        for name in self._names():
            stem, _, ext = name.partition(".")
            if ext == "json" and len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def list_checkpoints(self) -> list[int]:
        """Versions of single-file checkpoints present, ascending."""
        out = []
        for name in self._names():
            stem, _, ext = name.partition(".")
            if ext == "checkpoint.parquet" and len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

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
            except ValueError as e:
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
        final = self.io.path_of(self.commit_path(version))
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = os.path.join(os.path.dirname(final), f".{version:020d}.json.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            if before_publish is not None:
                before_publish()
            os.link(tmp, final)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        _fsync_dir(os.path.dirname(final))
        return True

    def read_last_checkpoint(self) -> dict[str, Any] | None:
        """``_last_checkpoint`` as a dict; None when absent or unreadable (it is a hint)."""
        try:
            raw = self.io.read_bytes(f"{self.log_dir}/{LAST_CHECKPOINT}")
            doc = json.loads(raw)
            return doc if isinstance(doc, dict) and isinstance(doc.get("version"), int) else None
        except (MissingFileError, ValueError):
            return None

    def write_last_checkpoint(self, version: int, size: int, num_add_files: int) -> None:
        doc = {"version": version, "size": size, "numOfAddFiles": num_add_files}
        self.io.write_atomic(f"{self.log_dir}/{LAST_CHECKPOINT}", json.dumps(doc).encode())


def check_store(io: FileIO, location: str) -> None:
    """Refuse stores without an atomic put-if-absent (every object store through pyarrow)."""
    if not io.supports_atomic_rename:
        raise InvalidOptionError(
            f"Delta table {location}: {io.scheme}:// has no put-if-absent through pyarrow, so "
            "two writers could both write the same version; write Delta tables on a local or "
            "shared POSIX filesystem"
        )


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
