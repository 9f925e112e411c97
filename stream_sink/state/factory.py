"""Opening state backends by name, and installing a snapshot as a state directory."""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Literal

from stream_sink.exceptions import AlreadyExistsError, CorruptStateError, InvalidOptionError
from stream_sink.io.private import make_private_tree, private_dirs
from stream_sink.state.backend import BackendKind, OperatorStateBackend
from stream_sink.state.layout import fsync_dir, fsync_tree, inspect_state_dir
from stream_sink.state.memory_backend import InMemoryStateBackend
from stream_sink.state.rocksdb_backend import RocksDBOptions, RocksDBStateBackend

KindOption = Literal["rocksdb", "memory", "auto"]


def open_state_backend(
    kind: KindOption,
    path: str | None,
    *,
    sink_id: str | None = None,
    sync: bool = True,
) -> OperatorStateBackend:
    """Open (creating when absent) the state at ``path``.

    ``kind="auto"`` opens whatever the directory holds, RocksDB when it is new.
    ``sink_id``, when given, must match the sink recorded in existing state.
    ``sync=False`` gives up durability of acknowledged writes (tests only).
    """
    if kind == "auto":
        kind = _detect(path)
    if kind == "rocksdb":
        if path is None:
            raise InvalidOptionError("the rocksdb state backend needs a directory path")
        return RocksDBStateBackend(RocksDBOptions(path=path, sync_writes=sync), sink_id=sink_id)
    if kind == "memory":
        return InMemoryStateBackend(path, sink_id=sink_id, sync=sync)
    raise InvalidOptionError(f"unknown state backend {kind!r}; use 'rocksdb', 'memory' or 'auto'")


def _detect(path: str | None) -> BackendKind:
    if path is None:
        return "memory"
    return "memory" if inspect_state_dir(path) == "memory" else "rocksdb"


def restore_from_snapshot(snapshot_dir: str, target_path: str) -> BackendKind:
    """Install a copy of ``snapshot_dir`` (made by ``snapshot_to``) at ``target_path``.

    The snapshot is validated (opened) in a temporary sibling of the target and only
    then renamed into place, so the target is either absent or a complete, valid
    state directory. An existing non-empty target is refused (AlreadyExistsError):
    the caller decides whether old state may be discarded. The snapshot is not changed.
    Returns the backend kind of the installed state.
    """
    kind = inspect_state_dir(snapshot_dir)
    if kind not in ("rocksdb", "memory"):
        raise CorruptStateError(f"snapshot directory {snapshot_dir} is missing or empty")
    if inspect_state_dir(target_path) not in ("absent", "empty"):
        raise AlreadyExistsError(f"refusing to replace existing state at {target_path}")
    target = os.path.abspath(target_path)
    parent = os.path.dirname(target)
    private_dirs(parent)
    staging = f"{target}.restore-{uuid.uuid4().hex[:8]}"
    try:
        shutil.copytree(snapshot_dir, staging)
        open_state_backend(kind, staging).close()  # refuses a foreign or corrupt snapshot
        make_private_tree(staging)
        fsync_tree(staging)
        if os.path.isdir(target):
            os.rmdir(target)  # empty, checked above
        os.rename(staging, target)
        fsync_dir(parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return kind
