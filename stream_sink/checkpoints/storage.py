"""Completed checkpoints of one sink: ``<base>/<sink-id>/chk-<id>/``.

Layout of a checkpoint directory::

    chk-<id>/state-<token>/   a snapshot of the operator state (taken in place on a
                              local filesystem, else uploaded through FileIO)
    chk-<id>/_metadata        JSON: CheckpointMetadata + which state-<token> and backend

Invariants:
- ``_metadata`` is written last and atomically; a checkpoint is complete exactly when
  it exists, and then its state directory is complete too. Directories without it
  are ignored by every reader.
- Each attempt uploads to a fresh ``state-<token>``, so completing the same id again
  (a replayed batch after a restart) atomically switches to the new state; the old
  one is deleted only afterwards.
- Locally, a sink's checkpoint directories are ``0700`` and its files ``0600``
  (:mod:`stream_sink.io.private`): they record the table and its catalog settings.
- Retention never deletes the newest ``retain`` complete checkpoints; deleting one
  removes ``_metadata`` first, so a crash mid-delete leaves an incomplete (ignored)
  directory, never a complete one without state.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import uuid

import pyarrow.fs as pafs

from stream_sink.checkpoints.metadata import (
    CheckpointMetadata,
    CompletedCheckpoint,
    TableIdentity,
    parse_json_object,
)
from stream_sink.checkpoints.transfer import download_dir, write_snapshot
from stream_sink.exceptions import (
    CheckpointError,
    CorruptStateError,
    InvalidOptionError,
    MissingFileError,
    StreamSinkError,
)
from stream_sink.io.fileio import FileIO, is_temporary
from stream_sink.io.private import private_dirs
from stream_sink.state import OperatorStateBackend, open_state_backend, restore_from_snapshot
from stream_sink.state.layout import validate_sink_id

log = logging.getLogger(__name__)

METADATA_FILE = "_metadata"
TABLE_FILE = "_table.json"
"""Per sink: the table it writes (catalog, name, uuid), recorded at its first start."""
_CHK_DIR = re.compile(r"^chk-(\d+)$")
_STATE_DIR = re.compile(r"^state-[0-9a-f]+$")


class CheckpointStorage:
    """Writes, lists, reads, retains and restores the completed checkpoints of a sink."""

    def __init__(
        self, base_location: str, sink_id: str, io: FileIO | None = None, retain: int = 3
    ) -> None:
        if retain < 1:
            raise InvalidOptionError(f"checkpoint retention must keep at least 1, got {retain}")
        self.sink_id = validate_sink_id(sink_id)
        self.io = io or FileIO.for_location(base_location)
        self.location = f"{base_location.rstrip('/')}/{sink_id}"
        self.retain = retain

    def checkpoint_location(self, checkpoint_id: int) -> str:
        return f"{self.location}/chk-{checkpoint_id}"

    # --- writing ------------------------------------------------------------------

    def complete(
        self, checkpoint_id: int, metadata: CheckpointMetadata, state_backend: OperatorStateBackend
    ) -> CompletedCheckpoint:
        """Snapshot ``state_backend`` into ``chk-<id>``, then write ``_metadata``.

        When this returns the checkpoint is durable and complete; before, it is not.
        """
        self._check_belongs(checkpoint_id, metadata)
        chk = self.checkpoint_location(checkpoint_id)
        previous = self._read_if_complete(chk)
        state_name = f"state-{uuid.uuid4().hex[:12]}"
        if self.io.scheme == "file":
            private_dirs(self.io.path_of(chk))
        write_snapshot(self.io, state_backend, f"{chk}/{state_name}")
        doc = metadata.to_dict()
        doc["state"] = {"dir": state_name, "backend": state_backend.kind}
        self.io.write_atomic(f"{chk}/{METADATA_FILE}", _dumps(doc).encode(), private=True)
        done = CompletedCheckpoint(metadata, chk, f"{chk}/{state_name}", state_backend.kind)
        if previous is not None and previous.state_location != done.state_location:
            self._delete_quietly(previous.state_location)
        self.apply_retention()
        return done

    def _check_belongs(self, checkpoint_id: int, metadata: CheckpointMetadata) -> None:
        if metadata.checkpoint_id != checkpoint_id:
            raise CheckpointError(
                f"checkpoint {checkpoint_id} of sink {self.sink_id!r}: metadata is for "
                f"checkpoint {metadata.checkpoint_id}"
            )
        if metadata.sink_id != self.sink_id:
            raise CheckpointError(
                f"checkpoint {checkpoint_id} at {self.location}: metadata is for sink "
                f"{metadata.sink_id!r}, not {self.sink_id!r}"
            )

    # --- reading ------------------------------------------------------------------

    def list_completed(self) -> list[CompletedCheckpoint]:
        """Complete checkpoints, oldest first. A corrupt ``_metadata`` raises."""
        found = []
        for _cid, chk in self._checkpoint_dirs():
            done = self._read_if_complete(chk)
            if done is not None:
                found.append(done)
        return found

    def latest(self) -> CompletedCheckpoint | None:
        completed = self.list_completed()
        return completed[-1] if completed else None

    def read(self, checkpoint_id: int) -> CompletedCheckpoint:
        chk = self.checkpoint_location(checkpoint_id)
        done = self._read_if_complete(chk)
        if done is None:
            raise CheckpointError(
                f"checkpoint {checkpoint_id} of sink {self.sink_id!r} is not complete: "
                f"{chk}/{METADATA_FILE} does not exist"
            )
        return done

    def _checkpoint_dirs(self) -> list[tuple[int, str]]:
        dirs = []
        for loc in self.io.list_dir(self.location):
            m = _CHK_DIR.match(loc.rsplit("/", 1)[-1])
            if m:
                dirs.append((int(m.group(1)), loc))
        return sorted(dirs)

    def _read_if_complete(self, chk: str) -> CompletedCheckpoint | None:
        where = f"{chk}/{METADATA_FILE}"
        try:
            raw = self.io.read_bytes(where)
        except MissingFileError:
            return None
        doc = parse_json_object(raw, where=where)
        metadata = CheckpointMetadata.from_dict(doc, where=where)
        state = doc.get("state")
        if (
            not isinstance(state, dict)
            or not _STATE_DIR.match(str(state.get("dir", "")))
            or state.get("backend") not in ("rocksdb", "memory")
        ):
            raise CorruptStateError(f"{where}: field 'state' must name a state dir and backend")
        if chk.rsplit("/", 1)[-1] != f"chk-{metadata.checkpoint_id}":
            raise CorruptStateError(
                f"{where}: records checkpoint {metadata.checkpoint_id}, not its directory's"
            )
        if metadata.sink_id != self.sink_id:
            raise CheckpointError(
                f"{where}: belongs to sink {metadata.sink_id!r}, not {self.sink_id!r}"
            )
        return CompletedCheckpoint(metadata, chk, f"{chk}/{state['dir']}", state["backend"])

    # --- the table the sink writes ----------------------------------------------------

    def recorded_table(self) -> TableIdentity | None:
        """The table recorded in ``<location>/_table.json`` (None before the first start)."""
        return _read_table(self.io, f"{self.location}/{TABLE_FILE}")

    def record_table(self, identity: TableIdentity) -> None:
        """Record the table this sink writes (atomically; once, at its first start)."""
        self.io.write_atomic(
            f"{self.location}/{TABLE_FILE}", identity.to_json().encode(), private=True
        )

    def other_sinks_tables(self) -> dict[str, TableIdentity]:
        """Tables recorded by the other sinks sharing this checkpoint location."""
        base = self.location.rsplit("/", 1)[0]
        out = {}
        for loc in self.io.list_dir(base):
            name = loc.rsplit("/", 1)[-1]
            if name == self.sink_id:
                continue
            try:
                identity = _read_table(self.io, f"{loc}/{TABLE_FILE}")
            except (OSError, StreamSinkError):  # a file, or not a sink's directory
                continue
            if identity is not None:
                out[name] = identity
        return out

    # --- restoring ----------------------------------------------------------------

    def restore_state(
        self, checkpoint: CompletedCheckpoint, target_state_dir: str, *, sync: bool = True
    ) -> OperatorStateBackend:
        """Install the checkpoint's state at ``target_state_dir`` and open it.

        The target must be absent or empty (AlreadyExistsError otherwise): the caller
        moves corrupt state aside first. The returned backend belongs to the caller.
        """
        local = tempfile.mkdtemp(prefix="stream-sink-restore-")
        try:
            n = download_dir(self.io, checkpoint.state_location, f"{local}/state")
            if n == 0:
                raise CheckpointError(
                    f"checkpoint {checkpoint.checkpoint_id}: state directory "
                    f"{checkpoint.state_location} is missing or empty"
                )
            kind = restore_from_snapshot(f"{local}/state", target_state_dir)
        finally:
            shutil.rmtree(local, ignore_errors=True)
        return open_state_backend(kind, target_state_dir, sink_id=self.sink_id, sync=sync)

    # --- retention ----------------------------------------------------------------

    def apply_retention(self) -> None:
        """Keep the newest ``retain`` complete checkpoints; drop older ones, incomplete
        directories older than the newest complete one, and superseded state dirs.
        Failures to delete are logged, never raised: the checkpoint is already durable.
        """
        complete = {c.checkpoint_id: c for c in self.list_completed()}
        if not complete:
            return
        newest = max(complete)
        keep = set(sorted(complete)[-self.retain :])
        for cid, chk in self._checkpoint_dirs():
            if cid in keep:
                self._drop_stray_state_dirs(complete[cid])
            elif cid in complete or cid < newest:
                self._delete_quietly(f"{chk}/{METADATA_FILE}")
                self._delete_quietly(chk)

    def sweep_temporaries(self) -> list[str]:
        """Delete the temporary files an interrupted atomic write left in the sink's
        directory (``_table.json.<hex>.tmp``, ``maintenance.json.<hex>.tmp``: the
        process died between writing and renaming; those inside a checkpoint directory
        go with it, by :meth:`apply_retention`). Call while no write of this sink is
        under way (at restore). Returns the deleted locations."""
        gone = []
        for loc in self.io.list_dir(self.location):
            if is_temporary(loc.rsplit("/", 1)[-1]):
                self._delete_quietly(loc)
                gone.append(loc)
        return gone

    def _drop_stray_state_dirs(self, done: CompletedCheckpoint) -> None:
        for loc in self.io.list_dir(done.location):
            name = loc.rsplit("/", 1)[-1]
            if name != METADATA_FILE and loc != done.state_location:
                self._delete_quietly(loc)

    def _delete_quietly(self, location: str) -> None:
        try:
            info = self.io.filesystem().get_file_info(self.io.path_of(location))
            if info.type == pafs.FileType.Directory:
                self.io.delete_dir(location)
            elif info.type == pafs.FileType.File:
                self.io.delete(location)
        except OSError as e:
            log.warning("could not delete %s: %s", location, e)


def _read_table(io: FileIO, location: str) -> TableIdentity | None:
    try:
        raw = io.read_bytes(location)
    except MissingFileError:
        return None
    return TableIdentity.from_json(raw, where=location)


def _dumps(doc: dict[str, object]) -> str:
    return json.dumps(doc, sort_keys=True, indent=1)
