"""Iceberg behind the commit protocol's target interface.

Staging = staging manifests (:mod:`.staging`); the watermark lives in snapshot summaries
and in a per-sink table property set in the same metadata commit, which no snapshot
expiry removes (:mod:`.watermark`), and is validated inside the commit after every
refresh (:mod:`.table_commit`). With ``deletes="positions"`` a batch's equality deletes
are committed as deletion vectors or position delete files instead, through an index of
the table's keys the target keeps between commits (:mod:`.position_deletes`); such a target
refuses a v1 table when it is made.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from stream_sink.checkpoints.metadata import TableIdentity
from stream_sink.exceptions import InvalidOptionError, MissingFileError
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.secrets import recorded_settings
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFile
from stream_sink.table.snapshots import MAIN_BRANCH
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

from ..shapes import CommitGroup
from ..source_position import SourcePosition
from ..target import BatchFiles, CommitTarget, StagingNamer
from .event_time import event_time_field
from .position_deletes import PositionResolver
from .source_position import sink_position
from .staging import (
    ManifestNamer,
    StagedManifests,
    delete_manifests,
    deserialize_staged_manifests,
    read_staged_files,
    serialize_staged_manifests,
    sweep_unreferenced,
    write_staging_manifests,
)
from .table_commit import SinkIdentity, commit_group, committed_paths, delete_unreferenced
from .watermark import committed_watermark

log = logging.getLogger(__name__)


class IcebergTarget(CommitTarget[Table]):
    """An Iceberg table (one branch) as the sink's target."""

    def __init__(
        self,
        table: Table,
        *,
        branch: str = MAIN_BRANCH,
        snapshot_properties: Mapping[str, str] | None = None,
        deletes: str = "equality",
        event_time_column: str | None = None,
    ) -> None:
        if event_time_column is not None:
            event_time_field(table.schema(), event_time_column, table=str(table.name))
        self.event_time_column = event_time_column
        self.table = table
        self.branch = branch
        self.snapshot_properties = {str(k): str(v) for k, v in (snapshot_properties or {}).items()}
        self.positions = _positions(table, deletes)

    @property
    def committed(self) -> Table:
        return self.table

    @property
    def name(self) -> str:
        return str(self.table.name)

    @property
    def properties(self) -> Mapping[str, str]:
        return self.table.properties

    def decode(self, raw: bytes) -> WriteResult:
        return WriteResult.from_bytes(raw)

    def empty(self) -> WriteResult:
        return WriteResult()

    def stage(
        self, namer: StagingNamer, checkpoint_id: int, batch_id: int, files: BatchFiles
    ) -> bytes:
        assert isinstance(files, WriteResult)
        if files.is_empty:
            return b""
        manifests = ManifestNamer(namer.job_id, namer.operator_id, namer.token)
        staged = write_staging_manifests(self.table, manifests, checkpoint_id, batch_id, files)
        if files.truncate:
            staged = replace(staged, truncate=True)
        return serialize_staged_manifests(staged) if not staged.is_empty else b""

    def _manifests(self, payload: bytes, where: str) -> StagedManifests:
        return deserialize_staged_manifests(payload, where=where) if payload else StagedManifests()

    def unstage(self, payload: bytes, *, where: str, committed: bool) -> WriteResult:
        staged = self._manifests(payload, where)
        if staged.is_empty:
            return WriteResult()
        try:
            return read_staged_files(self.table.io, self.table.metadata, staged)
        except MissingFileError:
            if not committed:
                raise
            log.info("%s: committed batch has no staging manifests left", where)
            return WriteResult()

    def release(self, payloads: Iterable[bytes], *, where: str) -> None:
        manifests = [m for p in payloads for m in self._manifests(p, where).manifests]
        delete_manifests(self.table.io, manifests)

    def sweep(self, namer: StagingNamer, referenced: Iterable[bytes], *, where: str) -> None:
        paths = {m.manifest_path for p in referenced for m in self._manifests(p, where).manifests}
        manifests = ManifestNamer(namer.job_id, namer.operator_id, namer.token)
        sweep_unreferenced(self.table, manifests, paths)

    def watermark(self, job_id: str, operator_id: str) -> int:
        return committed_watermark(self.table.refresh().metadata, job_id, operator_id, self.branch)

    def source_position(self, operator_id: str) -> SourcePosition | None:
        return sink_position(self.table.refresh().metadata, operator_id, self.branch)

    def commit(
        self, group: CommitGroup, job_id: str, operator_id: str, metrics: CommitterMetrics
    ) -> int | None:
        who = SinkIdentity(
            job_id, operator_id, self.branch, self.snapshot_properties, self.event_time_column
        )
        return commit_group(self.table, group, who, metrics, self.positions)

    def delete_unreferenced(
        self, files: Sequence[BatchFiles], job_id: str, operator_id: str, from_batch: int
    ) -> list[str]:
        data: list[DataFile] = []
        for f in files:
            assert isinstance(f, WriteResult)
            data.extend(f.data_files)
            data.extend(f.delete_files)
        return delete_unreferenced(
            self.table,
            data,
            lambda: committed_paths(self.table, job_id, operator_id, self.branch, from_batch),
        )

    def delete_file(self, path: str) -> None:
        self.table.io.delete(path)

    def identity(self) -> TableIdentity:
        t = self.table
        return TableIdentity(
            t.catalog.name, t.name, t.metadata.table_uuid, catalog_settings(t.catalog)
        )

    def file_exists(self, path: str) -> bool:
        return self.table.io.exists(path)


def _positions(table: Table, deletes: str) -> PositionResolver | None:
    """The resolver of ``deletes="positions"`` (None: ``equality``); InvalidOptionError
    for another value or a table whose format cannot hold position deletes (v1)."""
    if deletes == "equality":
        return None
    if deletes != "positions":
        raise InvalidOptionError(f"deletes={deletes!r} is not one of equality, positions")
    if table.format_version < 2:
        raise InvalidOptionError(
            f"table {table.name}: deletes='positions' needs a v2 or v3 table (position "
            f"deletes or deletion vectors); it is v{table.format_version}: upgrade it "
            "(stream-sink table upgrade) or use deletes='equality'"
        )
    return PositionResolver()


def catalog_settings(catalog: Catalog) -> dict[str, str] | None:
    """What opens ``catalog`` again, for ``stream-sink status``: its type (the kind it
    is: ``hadoop``, ``sql``, ``rest``) and the properties the secret rule allows to
    record (:func:`stream_sink.secrets.recorded_settings`: ``warehouse``, ``uri``
    without its passwords, ``s3.endpoint``, ...; never a credential). None for
    catalogs of other kinds."""
    if catalog.kind is None:
        return None
    return recorded_settings({**catalog.properties, "type": catalog.kind})
