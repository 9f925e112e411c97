"""Recovering a table whose current metadata file is unreadable.

A corrupt or truncated current metadata file makes the table unusable for every reader
and writer. The way out is to point the catalog back to an older, readable metadata
version: :func:`plan_recovery` says what that would lose (the versions after it, and
the snapshots they added where they can still be read); :func:`recover` commits the
chosen version's content as a NEW metadata version through the catalog's ordinary
atomic swap (Hadoop: the next ``v<N>.metadata.json``; SQL: compare-and-swap of the
pointer), so every engine sees it, nothing is deleted, and the unreadable file stays
in place for inspection.

Versions come from the metadata file names (Hadoop ``v<N>.metadata.json``, SQL and
Java ``<NNNNN>-<uuid>.metadata.json``) in the current metadata file's directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stream_sink.exceptions import NoSuchSnapshotError, StreamSinkError
from stream_sink.table.catalog.base import Catalog, table_identifier
from stream_sink.table.catalog.metadata_files import metadata_file_version
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.snapshots import Snapshot


@dataclass(frozen=True)
class MetadataVersion:
    """One metadata file of the table: parsed, or the reason it cannot be read."""

    version: int
    location: str
    metadata: TableMetadata | None
    error: str | None = None

    @property
    def readable(self) -> bool:
        return self.metadata is not None


@dataclass(frozen=True)
class RecoveryPlan:
    """Pointing ``table`` back to ``target``: the versions after it are dropped, and with
    them the snapshots they added (as far as they can be read)."""

    table: str
    current_location: str
    target: MetadataVersion
    dropped: tuple[MetadataVersion, ...]
    lost_snapshots: tuple[Snapshot, ...]

    @property
    def unreadable_dropped(self) -> tuple[MetadataVersion, ...]:
        return tuple(v for v in self.dropped if not v.readable)


def metadata_versions(catalog: Catalog, identifier: str | Sequence[str]) -> list[MetadataVersion]:
    """Every metadata file of the table, oldest first, each parsed or with its error."""
    ident = table_identifier(identifier)
    current = catalog.current_metadata_location(ident)
    directory = current.rsplit("/", 1)[0]
    io = catalog.io_for(current)
    found: list[MetadataVersion] = []
    for location in io.list_dir(directory):
        version = metadata_file_version(location.rsplit("/", 1)[-1])
        if version is None:
            continue
        try:
            found.append(MetadataVersion(version, location, catalog.read_metadata(location)))
        except StreamSinkError as e:
            found.append(MetadataVersion(version, location, None, str(e)))
    return sorted(found, key=lambda v: (v.version, v.readable, v.location))


def plan_recovery(
    catalog: Catalog, identifier: str | Sequence[str], to_version: int
) -> RecoveryPlan:
    ident = table_identifier(identifier)
    name = ".".join(ident)
    versions = metadata_versions(catalog, ident)
    chosen = [v for v in versions if v.version == to_version and v.readable]
    if not chosen:
        readable = [v.version for v in versions if v.readable]
        raise NoSuchSnapshotError(
            f"table {name}: no readable metadata version {to_version}; readable versions: "
            f"{readable or 'none'}"
        )
    target = chosen[-1]
    assert target.metadata is not None
    dropped = tuple(v for v in versions if v.version > to_version)
    kept = {s.snapshot_id for s in target.metadata.snapshots}
    lost: dict[int, Snapshot] = {}
    for v in dropped:
        for s in v.metadata.snapshots if v.metadata is not None else ():
            if s.snapshot_id not in kept:
                lost[s.snapshot_id] = s
    return RecoveryPlan(
        name,
        catalog.current_metadata_location(ident),
        target,
        dropped,
        tuple(sorted(lost.values(), key=lambda s: s.sequence_number)),
    )


def recover(catalog: Catalog, plan: RecoveryPlan) -> str:
    """Commit ``plan.target``'s metadata as the table's newest version; its location.

    Fails with CommitFailedError (nothing changed) when the table moved since the plan.
    """
    metadata = plan.target.metadata
    assert metadata is not None
    location, _ = catalog.commit_metadata(
        plan.table, plan.current_location, metadata, base_metadata=metadata
    )
    return location
