"""The format-level Iceberg table handle: current metadata plus the catalog that can swap
it, and the commit operations. No Arrow writing or reading: users get the subclass
``stream_sink.tables.IcebergTable``, which adds ``append`` and ``scan``.

Invariants:
- ``metadata`` is the state as of the last load, refresh or own commit; other
  writers may have moved the table since. Operations always re-read the table
  (``refresh``) before computing a commit and after each failed attempt.
- The handle never writes metadata itself: the catalog owns the pointer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from stream_sink.io import FileIO
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.schema import Schema
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot
from stream_sink.table.sorting import SortOrder

if TYPE_CHECKING:
    from stream_sink.table.catalog.base import Catalog, Identifier
    from stream_sink.table.expire import ExpireSnapshots
    from stream_sink.table.operations import (
        FastAppend,
        MergeAppend,
        OverwriteFiles,
        ReplacePartitions,
        RowDelta,
    )
    from stream_sink.table.rewrite import RewriteFiles
    from stream_sink.table.rewrite_manifests import RewriteManifests
    from stream_sink.table.schema_update import UpdateSchema
    from stream_sink.table.spec_update import UpdateSpec


class Table:
    def __init__(
        self,
        identifier: Identifier,
        metadata: TableMetadata,
        metadata_location: str,
        io: FileIO,
        catalog: Catalog,
    ) -> None:
        self.identifier = identifier
        self.metadata = metadata
        self.metadata_location = metadata_location
        self.io = io
        self.catalog = catalog

    @property
    def name(self) -> str:
        return ".".join(self.identifier)

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.metadata_location!r})"

    # --- state -----------------------------------------------------------------

    def refresh(self) -> Table:
        """Re-read the current metadata from the catalog."""
        location = self.catalog.current_metadata_location(self.identifier)
        if location != self.metadata_location:
            self.metadata = self.catalog.read_metadata(location)
            self.metadata_location = location
        return self

    def record_commit(self, metadata: TableMetadata, location: str) -> None:
        """Adopt the metadata an operation just committed at ``location`` (the catalog
        has already swapped its pointer to it); no re-read needed."""
        self.metadata = metadata
        self.metadata_location = location

    @property
    def location(self) -> str:
        return self.metadata.location

    @property
    def properties(self) -> Mapping[str, str]:
        return self.metadata.properties

    @property
    def format_version(self) -> int:
        return self.metadata.format_version

    def schema(self) -> Schema:
        return self.metadata.schema

    def spec(self) -> PartitionSpec:
        return self.metadata.spec

    def sort_order(self) -> SortOrder:
        return self.metadata.sort_order

    def snapshots(self) -> list[Snapshot]:
        return list(self.metadata.snapshots)

    def current_snapshot(self) -> Snapshot | None:
        return self.metadata.current_snapshot()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        return self.metadata.snapshot_by_id(snapshot_id)

    def snapshot_for_ref(self, ref: str = MAIN_BRANCH) -> Snapshot | None:
        return self.metadata.snapshot_for_ref(ref)

    @property
    def data_location(self) -> str:
        return self.properties.get("write.data.path", f"{self.location}/data").rstrip("/")

    @property
    def metadata_dir(self) -> str:
        return self.properties.get("write.metadata.path", f"{self.location}/metadata").rstrip("/")

    # --- metadata changes ---------------------------------------------------------

    def update_schema(
        self, *, allow_incompatible_changes: bool = False, make_optional_from_data: bool = True
    ) -> UpdateSchema:
        """Schema evolution: ``with table.update_schema() as u: u.add_column(...)``
        (see ``stream_sink.table.schema_update``)."""
        from stream_sink.table.schema_update import UpdateSchema

        return UpdateSchema(
            self,
            allow_incompatible_changes=allow_incompatible_changes,
            make_optional_from_data=make_optional_from_data,
        )

    def update_spec(self) -> UpdateSpec:
        """Partition evolution: ``with table.update_spec() as u: u.add_field("ts", "day")``."""
        from stream_sink.table.spec_update import UpdateSpec

        return UpdateSpec(self)

    def upgrade_format_version(self, version: int) -> Table:
        """Raise the table's format version to ``version`` in one metadata-only commit
        (no snapshot, no data or manifest rewritten; readers of the old version may no
        longer read the table). Upgrading to the current version does nothing; a
        downgrade is refused (ValidationError). Returns ``self``, refreshed."""
        from stream_sink.table.metadata_commit import commit_metadata_change

        def change(meta: TableMetadata) -> TableMetadata | None:
            new = meta.with_format_version(version)
            return None if new is meta else new

        commit_metadata_change(self, change)
        return self

    def schemas(self) -> dict[int, Schema]:
        """Every schema of the table by id (the history of its evolution)."""
        return {s.schema_id: s for s in self.metadata.schemas}

    def specs(self) -> dict[int, PartitionSpec]:
        return {s.spec_id: s for s in self.metadata.partition_specs}

    # --- commit operations -------------------------------------------------------

    def new_fast_append(self, branch: str = MAIN_BRANCH) -> FastAppend:
        from stream_sink.table.operations import FastAppend

        return FastAppend(self, branch)

    def new_append(self, branch: str = MAIN_BRANCH) -> FastAppend | MergeAppend:
        """Merge append when ``commit.manifest-merge.enabled`` (Java's default: true
        for v2 tables' newAppend), fast append otherwise."""
        from stream_sink.table.operations import MergeAppend

        if self.properties.get("commit.manifest-merge.enabled", "true").lower() == "true":
            return MergeAppend(self, branch)
        return self.new_fast_append(branch)

    def new_row_delta(self, branch: str = MAIN_BRANCH) -> RowDelta:
        from stream_sink.table.operations import RowDelta

        return RowDelta(self, branch)

    def new_replace_partitions(self, branch: str = MAIN_BRANCH) -> ReplacePartitions:
        from stream_sink.table.operations import ReplacePartitions

        return ReplacePartitions(self, branch)

    def new_overwrite(self, branch: str = MAIN_BRANCH) -> OverwriteFiles:
        from stream_sink.table.operations import OverwriteFiles

        return OverwriteFiles(self, branch)

    def new_rewrite(self, branch: str = MAIN_BRANCH) -> RewriteFiles:
        """Replace files by files holding the same rows (compaction): Java's RewriteFiles,
        operation ``replace``. See ``stream_sink.table.rewrite``."""
        from stream_sink.table.rewrite import RewriteFiles

        return RewriteFiles(self, branch)

    def new_expire_snapshots(self) -> ExpireSnapshots:
        """Expire snapshots and delete the files only they used: Java's
        RemoveSnapshots. See ``stream_sink.table.expire``."""
        from stream_sink.table.expire import ExpireSnapshots

        return ExpireSnapshots(self)

    def new_rewrite_manifests(self, branch: str = MAIN_BRANCH) -> RewriteManifests:
        """Cluster data manifests by partition into target-size manifests (same live
        entries, operation ``replace``). See ``stream_sink.table.rewrite_manifests``."""
        from stream_sink.table.rewrite_manifests import RewriteManifests

        return RewriteManifests(self, branch)
