"""A Delta table's state at one version, and the reconciliation rules that build it.

Reconciliation (PROTOCOL.md "Action Reconciliation"): the newest protocol and metaData
win; a logical file is a (path, deletion vector id) pair and for each the newest add or
remove wins (an add cancels a tombstone, a remove drops the live file and leaves a
tombstone); for each appId the newest txn wins; for each domain the newest
``domainMetadata`` wins, and one with ``removed`` drops the domain. Within one version
the removes apply before the adds, since a version may replace a file's deletion vector
with a remove of (path, old DV) and an add of (path, new DV) in either order.
Invariants: a DeltaSnapshot is never mutated after :class:`SnapshotBuilder` built it;
``files`` are the live files keyed by their log path (at most one per path);
``tombstones`` are keyed by :func:`~stream_sink.delta.actions.file_key`; ``domains`` are
the live (not removed) domain metadata by domain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from stream_sink.exceptions import CorruptMetadataError

from .actions import (
    Action,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    file_key,
)
from .column_mapping import ColumnMapping, mapping_mode
from .schema import check_schema_string, schema_to_arrow

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
DEFAULT_CHECKPOINT_INTERVAL = 10


@dataclass(frozen=True)
class DeltaSnapshot:
    location: str
    version: int
    protocol: Protocol
    metadata: Metadata
    files: Mapping[str, AddFile]
    tombstones: Mapping[str, RemoveFile]
    txns: Mapping[str, Txn]
    domains: Mapping[str, DomainMetadata] = field(default_factory=dict)

    def domain_configuration(self, domain: str) -> str | None:
        """The configuration of live ``domain``; None when it is absent or removed."""
        found = self.domains.get(domain)
        return None if found is None else found.configuration

    @property
    def arrow_schema(self) -> pa.Schema:
        return schema_to_arrow(self.metadata.schema_string)

    @property
    def column_mapping(self) -> ColumnMapping:
        """How data files name this snapshot's columns (see :mod:`.column_mapping`)."""
        mode = mapping_mode(self.protocol, self.metadata.configuration)
        return ColumnMapping(self.metadata.schema_string, mode)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @property
    def configuration(self) -> Mapping[str, str]:
        return self.metadata.configuration

    @property
    def checkpoint_interval(self) -> int:
        raw = self.metadata.configuration.get(CHECKPOINT_INTERVAL)
        try:
            value = int(raw) if raw is not None else DEFAULT_CHECKPOINT_INTERVAL
        except ValueError:
            value = DEFAULT_CHECKPOINT_INTERVAL
        return max(1, value)

    def txn_version(self, app_id: str) -> int | None:
        txn = self.txns.get(app_id)
        return None if txn is None else txn.version

    @property
    def num_records(self) -> int | None:
        """Total live rows from file statistics, less the rows deletion vectors delete;
        None when a file has none."""
        from .stats import num_records

        total = 0
        for add in self.files.values():
            n = num_records(add.stats)
            if n is None:
                return None
            total += n - int((add.deletion_vector or {}).get("cardinality") or 0)
        return total


class SnapshotBuilder:
    """Applies versions in order onto a base (a checkpoint or version 0)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.version = -1
        self.protocol: Protocol | None = None
        self.metadata: Metadata | None = None
        self.files: dict[str, AddFile] = {}
        self.tombstones: dict[str, RemoveFile] = {}
        self.txns: dict[str, Txn] = {}
        self.domains: dict[str, DomainMetadata] = {}

    @staticmethod
    def of(snapshot: DeltaSnapshot) -> SnapshotBuilder:
        b = SnapshotBuilder(snapshot.location)
        b.version = snapshot.version
        b.protocol, b.metadata = snapshot.protocol, snapshot.metadata
        b.files, b.tombstones = dict(snapshot.files), dict(snapshot.tombstones)
        b.txns = dict(snapshot.txns)
        b.domains = dict(snapshot.domains)
        return b

    def apply(self, version: int, actions: Iterable[Action]) -> SnapshotBuilder:
        actions = list(actions)
        for a in actions:
            if isinstance(a, RemoveFile):
                live = self.files.get(a.path)
                if live is not None and live.dv_id == a.dv_id:
                    del self.files[a.path]
                self.tombstones[file_key(a.path, a.dv_id)] = a
        for a in actions:
            if isinstance(a, AddFile):
                self.files[a.path] = a
                self.tombstones.pop(file_key(a.path, a.dv_id), None)
            elif isinstance(a, Txn):
                self.txns[a.app_id] = a
            elif isinstance(a, DomainMetadata):
                self._apply_domain(a)
            elif isinstance(a, Metadata):
                self.metadata = a
            elif isinstance(a, Protocol):
                self.protocol = a
        self.version = version
        return self

    def _apply_domain(self, action: DomainMetadata) -> None:
        if action.removed:
            self.domains.pop(action.domain, None)
        else:
            self.domains[action.domain] = action

    def build(self) -> DeltaSnapshot:
        where = f"Delta table {self.location} at version {self.version}"
        if self.protocol is None:
            raise CorruptMetadataError(f"{where}: no protocol action in the log")
        if self.metadata is None:
            raise CorruptMetadataError(f"{where}: no metaData action in the log")
        if not self.metadata.schema_string:
            raise CorruptMetadataError(
                f"{where}: the newest metaData action has no schemaString (a placeholder "
                "no later metaData replaced); the table is not readable at this version"
            )
        try:
            check_schema_string(self.metadata.schema_string)
        except CorruptMetadataError as e:
            raise CorruptMetadataError(f"{where}: {e}") from None
        return DeltaSnapshot(
            self.location,
            self.version,
            self.protocol,
            self.metadata,
            dict(self.files),
            dict(self.tombstones),
            dict(self.txns),
            dict(self.domains),
        )
