"""``DeltaSink(deletes="positions")``: a CDC batch's touched keys resolved at commit, through
an index of the table's keys, to the rows they delete, committed as deletion vectors.

A positions batch is its new rows (data files, one row per key: the batch's net
changes) and a Parquet file of its distinct touched keys (:class:`DeltaBatch` ``keys``);
no file of the table is read or rewritten when the batch is written. At commit
(:meth:`DeltaPositionResolver.resolve`, called by the Delta target):

1. The index (:class:`DeltaKeyPositions`: key -> data file and row of its live row, the
   NumPy hash table of :mod:`stream_sink.lookup.row_positions`, ~29 bytes per live
   integer key) must be at the version the commit is written on: it is built from the
   table (each live file's key columns without the rows its deletion vector deletes) on
   first use, after a restart and whenever that version is not the one it was last
   brought to (another writer committed); otherwise it is the one kept since this
   sink's previous commit.
2. The batches of the group are resolved in order: each one's keys are taken from the
   index, then its new files' keys are added, so a later batch of the group deletes
   from an earlier one's files (their add carries the vector).
3. Every data file hit gets one vector: its current vector's rows and the new ones,
   all of the commit's vectors in one file (:func:`write_deletion_vectors`); the file is
   removed and re-added with it (Delta's DML shape), so a concurrent remove or new
   vector of that file is a conflict (:mod:`.conflicts`).
4. The commit refuses any version landed since the lookup (StalePositionsError, checked
   on every snapshot the transaction is written on): every file the positions point at
   is then live with the vector they were merged with. On refusal or conflict the
   vectors written are deleted, the index dropped and the batch resolved again.
5. Committed on the lookup version + 1, the index is at the new version.

Invariants:
- A positions commit rewrites no data file: every delete is a deletion vector.
- Exact: each touched key's live rows at the lookup version (duplicates of other
  writers included) are deleted, and only they; the version committed is lookup + 1.
- The keys file stays the batch's until it is committed (a restart resolves it
  again); the target deletes it once the batch is committed.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.exceptions import InvalidOptionError, StalePositionsError
from stream_sink.io.fileio import FileIO
from stream_sink.lookup.row_positions import NONE, RowPositions, by_file

from .actions import AddFile, Metadata, Protocol, RemoveFile
from .batch import DeltaBatch
from .deletion_vectors import VectorReader, deleted_rows, dv_location, write_deletion_vectors
from .features import supports_deletion_vectors
from .log import DeltaLog
from .merge import MergeMode, conform_keys, net_changes, write_net_rows
from .scan import POSITION, read_file
from .snapshot import DeltaSnapshot
from .stats import with_loose_bounds

DELETES = ("copy-on-write", "positions")
"""``DeltaSink(deletes=...)``: how a CDC batch deletes the older rows of its keys."""
DELETION_VECTORS = "delta.enableDeletionVectors"


def check_deletes(deletes: str, mode: str, where: str) -> bool:
    """True for ``deletes="positions"``; InvalidOptionError for another value than
    :data:`DELETES` or positions outside the CDC modes (nothing older is deleted)."""
    if deletes not in DELETES:
        raise InvalidOptionError(f"{where}: deletes={deletes!r} is not one of {', '.join(DELETES)}")
    if deletes == "positions" and mode not in ("upsert", "changelog"):
        raise InvalidOptionError(
            f"{where}: deletes='positions' applies to mode 'upsert' or 'changelog' (mode "
            f"{mode!r} deletes no older row); drop the option"
        )
    return deletes == "positions"


def positions_configuration(configuration: Mapping[str, str], where: str) -> dict[str, str]:
    """The configuration of a table a positions sink creates: deletion vectors enabled
    (InvalidOptionError when ``configuration`` turns them off)."""
    if configuration.get(DELETION_VECTORS, "true").strip().lower() != "true":
        raise InvalidOptionError(
            f"{where}: deletes='positions' commits deletion vectors, but the configuration "
            f"sets {DELETION_VECTORS}={configuration[DELETION_VECTORS]!r}; drop that "
            "setting or use deletes='copy-on-write'"
        )
    return {**configuration, DELETION_VECTORS: "true"}


def require_deletion_vectors(snapshot: DeltaSnapshot, where: str) -> None:
    """InvalidOptionError unless the table takes deletion vectors (protocol feature and
    ``delta.enableDeletionVectors``)."""
    if not supports_deletion_vectors(snapshot.protocol, snapshot.configuration):
        raise InvalidOptionError(
            f"{where}: deletes='positions' commits deletion vectors, which table "
            f"{snapshot.location} does not take; enable them (Delta on Spark: ALTER TABLE "
            f"... SET TBLPROPERTIES ('{DELETION_VECTORS}' = 'true')) or use "
            "deletes='copy-on-write'"
        )


class DeltaKeyPositions(RowPositions[AddFile]):
    """Key -> (data file, row) of every live row of a Delta table at ``version``."""

    def __init__(self, keys: tuple[str, ...], version: int) -> None:
        super().__init__()
        self.keys = keys
        self.version = version

    def add_file(self, snapshot: DeltaSnapshot, io: FileIO, add: AddFile) -> None:
        """Remember the live rows of ``add`` (read without the rows its vector deletes)."""
        rows = self._live_keys(snapshot, io, add)
        live = rows.column(POSITION).to_numpy()
        self.add_rows(add.path, add, [rows.column(k) for k in self.keys], live)

    def _live_keys(self, snapshot: DeltaSnapshot, io: FileIO, add: AddFile) -> pa.Table:
        schema = pa.schema([snapshot.arrow_schema.field(k) for k in self.keys])
        return read_file(snapshot, io, add, schema, positions=True)

    def catch_up(self, snapshot: DeltaSnapshot, io: FileIO, log: DeltaLog) -> bool:
        """Move the index from its version to ``snapshot``'s by the log's versions in
        between (another writer's appends, deletes, compactions): a removed file's live
        rows and the rows a new vector deletes are forgotten, a new file's rows added.
        Costs the files those versions touch, not the table. False (the index is then
        half moved: rebuild it) when a version changes the schema or protocol, is gone
        from the log, or names a file the index does not know."""
        for v in range(self.version + 1, snapshot.version + 1):
            try:
                actions = log.read_commit(v)
            except Exception:  # cleaned from the log: a rebuild reads the table instead
                return False
            if any(isinstance(a, (Metadata, Protocol)) for a in actions):
                return False
            try:
                if not self._apply(snapshot, io, actions):
                    return False
            except Exception:  # e.g. a removed file vacuumed since: the rebuild reads live ones
                return False
        self.version = snapshot.version
        return True

    def _apply(self, snapshot: DeltaSnapshot, io: FileIO, actions: Sequence[Any]) -> bool:
        adds = {a.path: a for a in actions if isinstance(a, AddFile)}
        for r in (a for a in actions if isinstance(a, RemoveFile)):
            old = self.entry(r.path)
            if old is None:
                return False
            if r.path not in adds and not self._drop(snapshot, io, old, None):
                return False
        for path, add in adds.items():
            old = self.entry(path)
            if old is None:
                self.add_file(snapshot, io, add)
            elif not self._drop(snapshot, io, old, add):
                return False
        return True

    def _drop(self, snapshot: DeltaSnapshot, io: FileIO, old: AddFile, new: AddFile | None) -> bool:
        """Forget the rows of ``old`` that ``new`` (the same file under a new vector;
        None: removed) no longer has live; ``new`` becomes the file's entry."""
        rows = self._live_keys(snapshot, io, old)
        gone = np.ones(rows.num_rows, dtype=bool)
        if new is not None:  # the rows its new vector deletes: no second read of the file
            dv = new.deletion_vector
            where = f"Delta table {snapshot.location}, file {new.path}"
            deleted = deleted_rows(snapshot.location, io, dv, where) if dv else NONE
            gone = np.isin(rows.column(POSITION).to_numpy(), deleted.astype(np.int64))
            self.ordinal(new.path, new)
        rows = rows.filter(pa.array(gone))
        cols = [rows.column(k) for k in self.keys]
        return self.drop_rows(old.path, cols, rows.column(POSITION).to_numpy())


def build_positions(
    snapshot: DeltaSnapshot, io: FileIO, keys: tuple[str, ...]
) -> DeltaKeyPositions:
    """The index of the live rows of ``snapshot`` (a read of every live file's keys)."""
    index = DeltaKeyPositions(keys, snapshot.version)
    for add in sorted(snapshot.files.values(), key=lambda a: a.path):
        index.add_file(snapshot, io, add)
    return index


@dataclass(frozen=True)
class BatchKeys:
    """What one batch of a group brings to a positions commit: its new data files and
    its touched keys (None: the batch deletes nothing older)."""

    adds: tuple[AddFile, ...]
    keys: pa.Table | None


@dataclass
class DeltaResolution:
    """The adds and removes of a positions commit, resolved at ``version``."""

    adds: tuple[AddFile, ...]
    removes: tuple[RemoveFile, ...]
    version: int
    written: tuple[str, ...] = ()
    """The deletion vector file this resolution wrote (deleted when it is abandoned)."""
    resolved: int = 0
    """Rows of the table (and of earlier batches of the group) deleted by position."""

    def unchanged(self, snapshot: DeltaSnapshot) -> None:
        """Validation: the commit is written on the lookup version (StalePositionsError)."""
        if snapshot.version != self.version:
            raise StalePositionsError(
                f"Delta table {snapshot.location}: version {snapshot.version} was committed "
                f"after the batch's deletes were resolved at version {self.version}; "
                "resolving them again"
            )


class DeltaPositionResolver:
    """The index of one table (kept between commits) and the resolution of a group."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = tuple(keys)
        self.index: DeltaKeyPositions | None = None
        self.builds = 0
        self.moves = 0
        """Times the kept index was moved over other writers' versions instead of built."""

    def resolve(
        self,
        snapshot: DeltaSnapshot,
        io: FileIO,
        batches: Sequence[BatchKeys],
        log: DeltaLog | None = None,
    ) -> DeltaResolution:
        """The group's files with its keys' live rows deleted by vectors at ``snapshot``
        (``log``: the table's, to move a kept index over other writers' versions)."""
        index = self._index_at(snapshot, io, log)
        hits: dict[int, np.ndarray] = {}
        adds: dict[str, AddFile] = {}
        for batch in batches:
            if batch.keys is not None and batch.keys.num_rows:
                keys = conform_keys(batch.keys.select(list(self.keys)), snapshot.arrow_schema)
                for ordinal, rows in by_file(index.take([keys.column(k) for k in self.keys])):
                    old = hits.get(ordinal, NONE)
                    hits[ordinal] = np.union1d(old, rows) if len(old) else rows
            for add in batch.adds:
                adds[add.path] = add
                index.add_file(snapshot, io, add)
        now = int(time.time() * 1000)
        readds, removes, written = self._vectors(snapshot, io, index, hits, adds, now)
        return DeltaResolution(
            (*readds, *adds.values()),
            removes,
            snapshot.version,
            written=written,
            resolved=sum(len(r) for r in hits.values()),
        )

    def _vectors(
        self,
        snapshot: DeltaSnapshot,
        io: FileIO,
        index: DeltaKeyPositions,
        hits: dict[int, np.ndarray],
        adds: dict[str, AddFile],
        now: int,
    ) -> tuple[list[AddFile], tuple[RemoveFile, ...], tuple[str, ...]]:
        """Per file hit, its vector merged with its current one, all in one file; the
        table's files are removed and re-added with it, the group's own adds carry it."""
        if not hits:
            return [], (), ()
        reader = VectorReader(snapshot.location, io)
        files = [index.files[o] for o in sorted(hits)]
        vectors = []
        for ordinal, f in zip(sorted(hits), files, strict=True):
            rows = hits[ordinal].astype(np.uint64)
            if f.deletion_vector is not None:
                where = f"Delta table {snapshot.location}, file {f.path}"
                rows = np.union1d(rows, reader.rows(f.deletion_vector, where))
            vectors.append(rows)
        descriptors = write_deletion_vectors(snapshot.location, io, vectors)
        written = (dv_location(snapshot.location, descriptors[0]),)
        readds: list[AddFile] = []
        removes: list[RemoveFile] = []
        for f, dv in zip(files, descriptors, strict=True):
            marked = replace(
                f, deletion_vector=dv, stats=with_loose_bounds(f.stats), modification_time=now
            )
            index.ordinal(f.path, marked)
            if f.path in adds:  # the group's own file: its add carries the vector
                adds[f.path] = marked
                continue
            readds.append(replace(marked, data_change=True))
            removes.append(f.remove(now))
        return readds, tuple(removes), written

    def _index_at(
        self, snapshot: DeltaSnapshot, io: FileIO, log: DeltaLog | None
    ) -> DeltaKeyPositions:
        """The index at ``snapshot``: the one kept, moved over the versions since (with
        ``log``), or built from the table."""
        index = self.index
        if index is not None and index.version < snapshot.version and log is not None:
            if index.catch_up(snapshot, io, log):
                self.moves += 1
                return index
            index = None
        if index is None or index.version != snapshot.version:
            index = self.index = build_positions(snapshot, io, self.keys)
            self.builds += 1
        return index

    def committed(self, resolution: DeltaResolution, version: int) -> None:
        """The group resolved in ``resolution`` is committed as ``version``: the index,
        moved forward by the resolution, is at it (dropped if another version landed
        in between, which the validation refuses)."""
        index = self.index
        if index is None:
            return
        if version != resolution.version + 1:
            self.index = None
            return
        index.version = version

    def abandon(self, io: FileIO, resolution: DeltaResolution | None, *, delete: bool) -> None:
        """Drop the index (its keys were taken); delete the vector file when ``delete``
        (the commit is known not to have landed)."""
        self.index = None
        if resolution is None or not delete:
            return
        for location in resolution.written:
            with contextlib.suppress(Exception):  # an orphan vector file is harmless
                io.delete(location)


def positions_batch(
    snapshot: DeltaSnapshot,
    io: FileIO,
    changes: pa.Table,
    keys: Sequence[str],
    mode: MergeMode,
    keys_folder: str,
    row_kind_column: str | None = None,
    order_by: Sequence[str] = (),
) -> DeltaBatch:
    """A positions batch of ``changes`` (what ``DeltaSink`` writes with its executors, in
    one process): the rows it leaves as new files, its touched keys in a keys file under
    ``keys_folder``. Nothing of the table is read."""
    final, touched = net_changes(changes, keys, mode, row_kind_column, order_by)
    adds = write_net_rows(snapshot, io, final)
    if not touched.num_rows:
        return DeltaBatch(tuple(adds))
    path = keys_location(keys_folder)
    write_keys(io, path, conform_keys(touched, snapshot.arrow_schema))
    return DeltaBatch(tuple(adds), keys=(path,))


def keys_folder(table_location: str, sink_id: str) -> str:
    """Where a sink writes its positions batches' keys files: under the table's
    ``_stream_sink`` folder (readers and VACUUM skip ``_`` folders), one per sink."""
    return f"{table_location.rstrip('/')}/_stream_sink/touched-keys/{sink_id}"


def keys_location(keys_folder: str) -> str:
    """A new keys file's location under ``keys_folder`` (named by a uuid)."""
    return f"{keys_folder.rstrip('/')}/{uuid.uuid4().hex}.parquet"


def read_keys(io: FileIO, path: str) -> pa.Table:
    """A batch's touched keys file."""
    with io.open_input(path) as f:
        return pq.read_table(f)


def write_keys(io: FileIO, path: str, keys: pa.Table) -> None:
    """Write a batch's distinct touched keys (the file a positions batch stages)."""
    with io.open_output(path) as out:
        pq.write_table(keys, out)
