"""The small frozen results each maintenance action returns.

Every result has ``to_dict()`` (a string-keyed map for ``--json`` and logs); counts
are of files the committed operation changed, never of files merely looked at.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class _Result:
    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, **asdict(self)}

    @property
    def action(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class RewriteDataFilesResult(_Result):
    """Compaction: data files and bytes replaced and written, deletes applied."""

    snapshot_id: int | None
    groups: int
    rewritten_data_files: int
    added_data_files: int
    rewritten_bytes: int
    added_bytes: int
    removed_delete_files: int
    rewritten_records: int
    written_records: int
    attempts: int = 1
    remaining_files: int = 0
    """Files that qualified but were left for a later run (its ``max_files``/``max_bytes``)."""
    duration_ms: float = 0.0

    @property
    def action(self) -> str:
        return "rewrite-data-files"


@dataclass(frozen=True)
class ConvertEqualityDeletesResult(_Result):
    """Equality deletes replaced by position deletes naming the rows they delete."""

    snapshot_id: int | None
    removed_equality_delete_files: int
    removed_equality_deletes: int
    added_position_delete_files: int
    added_position_deletes: int
    data_files_scanned: int
    duration_ms: float = 0.0
    remaining_equality_delete_files: int = 0
    """Live equality delete files left for a later run (its ``max_files``)."""
    removed_position_delete_files: int = 0
    """v3: position delete files from before the upgrade, replaced by deletion vectors."""

    @property
    def action(self) -> str:
        return "convert-equality-deletes"


@dataclass(frozen=True)
class RemoveDanglingDeletesResult(_Result):
    """Delete files that applied to no live data file, removed."""

    snapshot_id: int | None
    removed_delete_files: int
    duration_ms: float = 0.0

    @property
    def action(self) -> str:
        return "remove-dangling-deletes"


@dataclass(frozen=True)
class ExpireSnapshotsResult(_Result):
    snapshots_before: int
    snapshots_after: int
    expired_snapshots: int
    deleted_files: int
    duration_ms: float = 0.0

    @property
    def action(self) -> str:
        return "expire-snapshots"


@dataclass(frozen=True)
class RemoveOrphanFilesResult(_Result):
    """Files under the table location no metadata reaches (``orphans``: deleted, or
    only listed when ``dry_run``); ``protected`` counts files kept although
    unreachable (too young, staging manifests, files a sink staged or holds);
    ``empty_dirs``: see below."""

    orphans: tuple[str, ...]
    orphan_bytes: int
    deleted: int
    protected: int
    files_listed: int
    dry_run: bool
    duration_ms: float = 0.0
    empty_dirs: tuple[str, ...] = ()
    """Directories of the data location left without files (each batch the Spark write
    route writes gets its own), older than the age limit: removed, or listed on a dry run."""

    @property
    def action(self) -> str:
        return "remove-orphan-files"


@dataclass(frozen=True)
class RewriteManifestsResult(_Result):
    snapshot_id: int | None
    manifests_before: int
    manifests_after: int
    duration_ms: float = 0.0

    @property
    def action(self) -> str:
        return "rewrite-manifests"


@dataclass(frozen=True)
class RemoveMetadataFilesResult(_Result):
    """Metadata files no longer in the metadata log, removed (or only listed when
    ``dry_run``); ``remaining``: such files left for a later call."""

    files: tuple[str, ...]
    removed: int
    failed: int
    remaining: int
    dry_run: bool
    duration_ms: float = 0.0

    @property
    def action(self) -> str:
        return "remove-old-metadata-files"
