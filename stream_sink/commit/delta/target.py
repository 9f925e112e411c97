"""Delta Lake behind the commit protocol's target interface.

- Identity: the table's location and ``metaData`` id (:func:`delta_identity`), recorded in
  the sink's state and checkpoints as an Iceberg table's catalog, name and uuid are.
- Staging: a batch's add/remove actions are themselves the staged form (the payload in
  ``staged/<ckpt>`` is the batch's bytes). The one staging file is a positions batch's
  keys file (``deletes="positions"``): released once the batch is committed, swept at a
  restore when no staged batch names it.
- Watermark: a ``txn`` action with appId ``stream-sink:<job id>:<sink id>`` and version =
  the highest batch id committed, in the same log version as the data.
- Source position: the query's offsets in the ``commitInfo`` of the same version and,
  on a table with the ``domainMetadata`` feature, in the sink's position domain
  (:mod:`.source_position`).
- Commit: one transaction per commit group; the watermark is validated on the snapshot
  each attempt is written on top of (after every lost race), and the removed files are
  declared read, so a concurrent remove of a file a MERGE rewrote is a conflict.
  Overwrite (dynamic partition overwrite) removes the live files of the partitions the
  batch writes, and declares those partitions read. A truncating batch (a TRUNCATE of
  the source table) removes every file live in the snapshot its commit is written on,
  in the same version as its adds and its ``txn``. A group of positions batches is
  resolved first (:mod:`stream_sink.delta.key_positions`: the keys looked up in the
  target's index, deletion vectors written) and committed only on the version it was
  resolved at; another version in between sends it back to resolve again.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pyarrow as pa

from stream_sink.checkpoints.metadata import DELTA_CATALOG, TableIdentity
from stream_sink.delta import DeltaTable, Txn
from stream_sink.delta.actions import AddFile
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.features import check_writable
from stream_sink.delta.key_positions import (
    BatchKeys,
    DeltaPositionResolver,
    DeltaResolution,
    read_keys,
)
from stream_sink.delta.paths import absolute_location
from stream_sink.delta.snapshot import DeltaSnapshot
from stream_sink.delta.stats import num_records
from stream_sink.exceptions import (
    CommitConflictError,
    CommitFailedError,
    CommitValidationError,
    InvalidOptionError,
)
from stream_sink.io.errors import quietly
from stream_sink.io.fileio import FileIO
from stream_sink.metrics.committer import CommitterMetrics

from ..failpoints import AFTER_METADATA_FILE_WRITE, AFTER_POSITION_DELETES, failpoint
from ..shapes import CommitGroup, Shape
from ..source_position import EventTimeRange, SourcePosition, event_time_entries
from ..target import INITIAL_WATERMARK, BatchFiles, CommitTarget, StagingNamer
from .event_time import check_event_time_column, event_time_range
from .source_position import position_parameters, sink_position, stamp_domain

log = logging.getLogger(__name__)

MAX_POSITION_RESOLVES = 8
"""Resolutions of one positions commit before it gives up (CommitFailedError): each one
follows a commit of another writer that landed between its lookup and its commit."""


def app_id(job_id: str, operator_id: str) -> str:
    """The ``txn`` appId of a (job, sink)."""
    return f"stream-sink:{job_id}:{operator_id}"


def committed_watermark(snapshot: DeltaSnapshot, job_id: str, operator_id: str) -> int:
    """The watermark of (job, sink) in ``snapshot``: its ``txn`` version, -1 with none.
    The one reader of a Delta sink's watermark: the committer and ``stream-sink status``
    read it here."""
    version = snapshot.txn_version(app_id(job_id, operator_id))
    return INITIAL_WATERMARK if version is None else version


def parse_app_id(app: str) -> tuple[str, str] | None:
    """(job id, sink id) of a ``txn`` appId :func:`app_id` made; None for another
    writer's appId (Delta's own streaming sink, say)."""
    prefix, _, rest = app.partition(":")
    job, _, sink = rest.partition(":")
    if prefix != "stream-sink" or not job or not sink:
        return None
    return job, sink


@dataclass(frozen=True)
class _Counted:
    """A committed file as the committer's metrics count it."""

    is_delete: bool
    record_count: int
    file_size_in_bytes: int


class DeltaTarget(CommitTarget[DeltaTable]):
    """A Delta table as the sink's target."""

    def __init__(
        self,
        table: DeltaTable,
        *,
        event_time_column: str | None = None,
        positions: DeltaPositionResolver | None = None,
        keys_folder: str | None = None,
    ) -> None:
        snapshot = table.snapshot
        check_writable(
            snapshot.protocol, f"Delta table {table.location}", snapshot.metadata.schema_string
        )
        if event_time_column is not None:
            check_event_time_column(table.schema, event_time_column, table=table.location)
        self.table = table
        self.event_time_column = event_time_column
        """The column whose low and high values each commit records (:mod:`.event_time`)."""
        self.positions = positions
        """``deletes="positions"``: the index the keys of positions batches are resolved in."""
        self.keys_folder = keys_folder
        """Where the sink writes positions batches' keys files, under the table's
        ``_stream_sink`` folder (read with the table's FileIO; swept at a restore)."""

    @property
    def committed(self) -> DeltaTable:
        return self.table

    @property
    def name(self) -> str:
        return self.table.location

    @property
    def properties(self) -> Mapping[str, str]:
        return self.table.snapshot.configuration

    def decode(self, raw: bytes) -> DeltaBatch:
        return DeltaBatch.from_bytes(raw)

    def empty(self) -> DeltaBatch:
        return DeltaBatch()

    def stage(
        self, namer: StagingNamer, checkpoint_id: int, batch_id: int, files: BatchFiles
    ) -> bytes:
        return files.to_bytes()

    def unstage(self, payload: bytes, *, where: str, committed: bool) -> DeltaBatch:
        return DeltaBatch.from_bytes(payload)

    def release(self, payloads: Iterable[bytes], *, where: str) -> None:
        """Delete the keys files of committed positions batches (best effort)."""
        for payload in payloads:
            for path in DeltaBatch.from_bytes(payload, where=where).keys:
                quietly(functools.partial(self.table.io.delete, path), "deleting")

    def sweep(self, namer: StagingNamer, referenced: Iterable[bytes], *, where: str) -> None:
        """Delete keys files of ``keys_folder`` no staged batch names: those of batches
        whose driver died between writing their keys and staging them."""
        folder = self.keys_folder
        if folder is None:
            return
        kept = {p for raw in referenced for p in DeltaBatch.from_bytes(raw, where=where).keys}
        io = self.table.io
        for entry in io.walk(folder):
            location = f"{folder.rstrip('/')}/{entry.relative}"
            if location not in kept:
                quietly(functools.partial(io.delete, location), "deleting")

    def _event_times(self, batch: DeltaBatch) -> EventTimeRange | None:
        column = self.event_time_column
        if column is None or column not in self.table.schema.names:
            return None
        physical = self.table.snapshot.column_mapping.physical_name(column)
        return event_time_range(batch.adds, physical)

    def watermark(self, job_id: str, operator_id: str) -> int:
        return committed_watermark(self.table.refresh().snapshot, job_id, operator_id)

    def commit(
        self, group: CommitGroup, job_id: str, operator_id: str, metrics: CommitterMetrics
    ) -> int | None:
        batches = [cast(DeltaBatch, b.files) for b in group.batches]
        if any(b.keys for b in batches):
            if self.positions is None:
                raise InvalidOptionError(
                    f"Delta table {self.table.location}: batches {group.lowest}..{group.stamp} "
                    "were staged by a sink with deletes='positions' and need their keys "
                    "resolved; restart the sink with deletes='positions' to commit them"
                )
            return self._commit_positions(group, batches, job_id, operator_id, metrics)
        batch = DeltaBatch.merge(batches)
        return self._commit_batch(group, batch, job_id, operator_id, metrics)[0]

    def _commit_batch(
        self,
        group: CommitGroup,
        batch: DeltaBatch,
        job_id: str,
        operator_id: str,
        metrics: CommitterMetrics,
        resolution: DeltaResolution | None = None,
    ) -> tuple[int | None, int]:
        """Commit ``batch`` for ``group``: (None, the version) when committed, (the
        refusing watermark, -1) when (job, sink) already committed the group."""
        app = app_id(job_id, operator_id)
        seen: list[int] = []

        def check(snapshot: Any) -> None:
            mark = snapshot.txn_version(app)
            if mark is not None and mark >= group.lowest:
                seen.append(mark)
                raise CommitValidationError(
                    f"Delta table {self.table.location}: {app} already committed up to batch "
                    f"{mark}; refusing to commit batches {group.lowest}..{group.stamp} again"
                )

        txn = self.table.refresh().new_transaction()
        txn.add_all(batch.adds).add_all(batch.removes)
        txn.read_files(r.path for r in batch.removes)
        operation = "WRITE"
        if batch.truncate:  # a group of its own (shapes)
            operation = "TRUNCATE" if not batch.adds else "MERGE"
            remove_all(txn, batch.adds)
        elif group.shape is Shape.REPLACE_PARTITIONS:
            operation = "WRITE (dynamic partition overwrite)"
            replace_partitions(txn, batch.adds, self.table.partition_columns)
        elif group.shape is Shape.ROW_DELTA:
            operation = "MERGE"
        txn.add(Txn(app, group.stamp, int(time.time() * 1000)))
        txn.validate(check).before_publish(lambda: failpoint(AFTER_METADATA_FILE_WRITE))
        if resolution is not None:
            txn.validate(resolution.unchanged)
        event_times = self._event_times(batch)
        stamp_domain(txn, group.offsets, job_id, operator_id, event_times)
        started = time.perf_counter()
        try:
            batches = f"{group.lowest}..{group.stamp}"
            parameters = {"stream-sink.batches": batches}
            parameters.update(position_parameters(group.offsets, job_id, operator_id))
            parameters.update(event_time_entries(event_times))
            version = txn.commit(operation, parameters)
        except CommitValidationError:
            if not seen:
                raise
            log.warning("commit of batches %s..%s refused: %s", group.lowest, group.stamp, seen[-1])
            return seen[-1], -1
        metrics.committed((time.perf_counter() - started) * 1000, cast(Any, _counted(batch)))
        log.info(
            "committed %s of batches %s..%s to %s as version %d",
            group.shape.value,
            group.lowest,
            group.stamp,
            self.table.location,
            version,
        )
        return None, version

    def _commit_positions(
        self,
        group: CommitGroup,
        batches: Sequence[DeltaBatch],
        job_id: str,
        operator_id: str,
        metrics: CommitterMetrics,
    ) -> int | None:
        """Resolve the group's keys at the table's version and commit the vectors with
        the group's files; again when another commit lands in between
        (:mod:`stream_sink.delta.key_positions`)."""
        positions = self.positions
        assert positions is not None
        io = self.table.io
        keys: list[BatchKeys] = []
        for _ in range(MAX_POSITION_RESOLVES):
            table = self.table.refresh()
            mark = table.snapshot.txn_version(app_id(job_id, operator_id))
            if mark is not None and mark >= group.lowest:  # its keys may be gone: not read
                log.warning("batches %s..%s already committed: %s", group.lowest, group.stamp, mark)
                return mark
            keys = keys or [BatchKeys(b.adds, _read_keys(io, b.keys)) for b in batches]
            resolution = None
            try:
                resolution = positions.resolve(table.snapshot, io, keys, table.log)
                failpoint(AFTER_POSITION_DELETES)
            except BaseException:
                positions.abandon(io, resolution, delete=True)
                raise
            resolved = DeltaBatch(resolution.adds, resolution.removes)
            try:
                mark, version = self._commit_batch(
                    group, resolved, job_id, operator_id, metrics, resolution
                )
            except CommitConflictError as e:  # StalePositionsError included
                log.info("Delta table %s: %s", table.location, e)
                positions.abandon(io, resolution, delete=True)
                continue
            except CommitValidationError:
                positions.abandon(io, resolution, delete=True)
                raise
            except BaseException:  # the version may have landed: its vectors stay
                positions.abandon(io, resolution, delete=False)
                raise
            if mark is not None:
                positions.abandon(io, resolution, delete=True)
                return mark
            positions.committed(resolution, version)
            return None
        raise CommitFailedError(
            f"Delta table {self.table.location}: other writers committed between resolving "
            f"and committing the deletes of batches {group.lowest}..{group.stamp} "
            f"{MAX_POSITION_RESOLVES} times"
        )

    def source_position(self, operator_id: str) -> SourcePosition | None:
        table = self.table.refresh()
        return sink_position(table.log, operator_id, table.snapshot)

    def delete_unreferenced(
        self, files: Sequence[BatchFiles], job_id: str, operator_id: str, from_batch: int
    ) -> list[str]:
        snapshot = self.table.refresh().snapshot
        keep = set(snapshot.files) | {r.path for r in snapshot.tombstones.values()}
        deleted = []
        for f in files:
            for path in f.all_paths():
                if path in keep:
                    continue
                try:
                    self.delete_file(path)
                    deleted.append(path)
                except Exception as e:  # cleanup only
                    log.warning("could not delete uncommitted file %s: %s", path, e)
        return deleted

    def delete_file(self, path: str) -> None:
        self.table.io.delete(absolute_location(self.table.location, path))

    def identity(self) -> TableIdentity:
        """The table's location and ``metaData`` id, with the store's settings that are
        not credentials (``s3.endpoint``, ``s3.region``): what ``stream-sink status``
        opens the table with. A table deleted and created again at the location has
        another id: the sink's state and checkpoints are refused for it."""
        return delta_identity(self.table)


def _read_keys(io: FileIO, paths: Sequence[str]) -> pa.Table | None:
    """The touched keys of one positions batch (its keys files), None without any."""
    if not paths:
        return None
    return pa.concat_tables([read_keys(io, p) for p in paths])


def delta_identity(table: DeltaTable) -> TableIdentity:
    """The :class:`TableIdentity` a Delta sink records (see ``DeltaTarget.identity``)."""
    settings = {**table.io.properties, "type": DELTA_CATALOG, "location": table.location}
    return TableIdentity(DELTA_CATALOG, table.location, table.snapshot.metadata.id, settings)


def replace_partitions(txn: Any, adds: Sequence[AddFile], columns: Sequence[str]) -> None:
    """Dynamic partition overwrite in ``txn``: remove the live files (of its read snapshot)
    in the partitions ``adds`` write, and declare those partitions and files read.
    ``columns`` are the table's partition columns (looked up by their physical names,
    as the log keys partition values under column mapping)."""
    mapping = txn.read_snapshot.column_mapping
    columns = [mapping.physical_name(c) for c in columns]
    parts = {tuple(a.partition_values.get(c) for c in columns) for a in adds}
    now = int(time.time() * 1000)
    new = {a.path for a in adds}

    def replaced(a: AddFile) -> bool:
        return tuple(a.partition_values.get(c) for c in columns) in parts

    old = [a for a in txn.read_snapshot.files.values() if a.path not in new and replaced(a)]
    txn.read_predicate(f"partitions {sorted(parts, key=str)}", replaced)
    txn.read_files(a.path for a in old)
    txn.add_all(a.remove(now) for a in old)


def remove_all(txn: Any, adds: Sequence[AddFile]) -> None:
    """A TRUNCATE in ``txn``: remove every file live in its read snapshot (but the batch's
    own ``adds``), and declare the whole table read, so a file a concurrent commit adds
    meanwhile is a conflict rather than a survivor of the truncate."""
    now = int(time.time() * 1000)
    new = {a.path for a in adds}
    old = [a for a in txn.read_snapshot.files.values() if a.path not in new]
    txn.read_predicate("the whole table (TRUNCATE)", lambda a: True)
    txn.read_files(a.path for a in old)
    txn.add_all(a.remove(now) for a in old)


def _counted(batch: DeltaBatch) -> list[_Counted]:
    out = [_Counted(False, num_records(a.stats) or 0, a.size) for a in batch.adds]
    out.extend(_Counted(True, 0, r.size or 0) for r in batch.removes)
    return out
