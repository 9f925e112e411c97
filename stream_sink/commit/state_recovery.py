"""Opening the committer's operator state, falling back to the newest completed checkpoint.

State is *lost* when the directory is missing, empty (or initialised but never used) or
corrupt. Lost state is rebuilt from the newest completed checkpoint, if any; a corrupt
directory is moved aside (``<dir>.corrupt-<time>``), never deleted. What lost state held
after that checkpoint cannot be rebuilt: the caller's loss check compares it with
upstream's acknowledgements before anything is touched (see ``FilesCommitter.restore``).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from stream_sink.checkpoints import CheckpointStorage, CompletedCheckpoint
from stream_sink.exceptions import CorruptStateError
from stream_sink.state import (
    META_JOB_ID,
    OperatorStateBackend,
    StateWriteBatch,
    inspect_state_dir,
    open_state_backend,
)

from .loss_check import META_COVERED

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StateDirectory:
    """Where the committer opens its own operator state (it then also closes it)."""

    path: str
    kind: Literal["rocksdb", "memory"] = "rocksdb"
    sync: bool = True


@dataclass(frozen=True)
class OpenedState:
    backend: OperatorStateBackend
    owned: bool
    lost: bool
    restored_from: CompletedCheckpoint | None = None
    moved_aside: str | None = None


LossCheck = Callable[[str, "CompletedCheckpoint | None"], None]
"""Called with (state location, checkpoint to restore or None) once state is known to be
lost, BEFORE anything is restored or moved: raising there leaves the state as it was, so
every later start refuses again until someone acts."""


def open_committer_state(
    source: OperatorStateBackend | StateDirectory,
    storage: CheckpointStorage | None,
    sink_id: str,
    check_loss: LossCheck | None = None,
) -> OpenedState:
    if isinstance(source, StateDirectory):
        return _open_directory(source, storage, sink_id, check_loss)
    lost = _is_fresh(source)
    if not lost:
        return OpenedState(source, owned=False, lost=False)
    latest = storage.latest() if storage is not None else None
    if check_loss is not None:
        check_loss(source.location, latest)
    if latest is not None and storage is not None:
        _copy_from_checkpoint(storage, latest, source)
    return OpenedState(source, owned=False, lost=True, restored_from=latest)


def _open_directory(
    source: StateDirectory,
    storage: CheckpointStorage | None,
    sink_id: str,
    check_loss: LossCheck | None,
) -> OpenedState:
    backend: OperatorStateBackend | None = None
    corrupt: CorruptStateError | None = None
    try:
        kind = inspect_state_dir(source.path)
        if kind in ("rocksdb", "memory"):
            backend = open_state_backend(kind, source.path, sink_id=sink_id, sync=source.sync)
            if not _is_fresh(backend):
                return OpenedState(backend, owned=True, lost=False)
    except CorruptStateError as e:
        corrupt = e
    if corrupt is not None and backend is not None:
        backend.close()
        backend = None
    latest = storage.latest() if storage is not None else None
    if check_loss is not None:
        try:
            check_loss(source.path, latest)
        except BaseException:
            if backend is not None:
                backend.close()
            raise
    moved = None
    if corrupt is not None:
        moved = f"{source.path.rstrip(os.sep)}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
        log.error("operator state at %s is corrupt (%s); moved to %s", source.path, corrupt, moved)
        os.rename(source.path, moved)
    if latest is None or storage is None:
        if backend is None:
            backend = open_state_backend(
                source.kind, source.path, sink_id=sink_id, sync=source.sync
            )
        return OpenedState(backend, owned=True, lost=True, moved_aside=moved)
    if backend is not None:  # initialised but never used: holds nothing worth keeping
        backend.close()
        shutil.rmtree(source.path)
    log.warning(
        "operator state of sink %s at %s is lost; restoring checkpoint %d",
        sink_id,
        source.path,
        latest.checkpoint_id,
    )
    backend = storage.restore_state(latest, source.path, sync=source.sync)
    return OpenedState(backend, owned=True, lost=True, restored_from=latest, moved_aside=moved)


def _is_fresh(backend: OperatorStateBackend) -> bool:
    """Never used by a committer: no entries and no job id recorded."""
    return backend.is_empty() and backend.get_meta(META_JOB_ID) is None


def _copy_from_checkpoint(
    storage: CheckpointStorage, checkpoint: CompletedCheckpoint, target: OperatorStateBackend
) -> None:
    """Install the checkpoint's entries (and job id) into an open, empty backend."""
    scratch = tempfile.mkdtemp(prefix="stream-sink-state-")
    try:
        restored = storage.restore_state(checkpoint, os.path.join(scratch, "state"))
        try:
            batch = StateWriteBatch()
            for key, value in restored.scan():
                batch.put(key, value)
            for name in (META_JOB_ID, META_COVERED):
                meta = restored.get_meta(name)
                if meta is not None:
                    batch.put_meta(name, meta)
        finally:
            restored.close()
        target.write(batch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
