"""Rewrite manifests (Java's ``RewriteManifests``): the same live data files, clustered
by partition spec and partition into manifests of about the target size, as one
``replace`` snapshot.

Invariants:
- The new snapshot has exactly the live entries of its parent: each carried over as
  EXISTING with its snapshot id and sequence numbers, so no file changes its data
  sequence number and no delete changes what it applies to. DELETED entries are
  dropped (they only describe the parent's own change).
- Delete manifests are kept as they are; data manifests are rewritten per spec
  (a file never changes spec), sorted by partition, cut at
  ``commit.manifest.target-size-bytes`` (default 8 MiB, estimated from the sizes of
  the manifests read). Specs with a single manifest already under the target are
  left alone.
- A failed commit deletes the manifests it wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_sink.table.manifest import (
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.operations import SnapshotProducer
from stream_sink.table.snapshots import Operation, Snapshot
from stream_sink.table.summary import SummaryBuilder

TARGET_SIZE = "commit.manifest.target-size-bytes"
DEFAULT_TARGET_SIZE = 8 * 1024 * 1024


class RewriteManifests(SnapshotProducer):
    """Cluster data manifests by partition; see the module docstring."""

    def _operation(self) -> str:
        return Operation.REPLACE

    def _manifests(
        self, base: TableMetadata, parent: Snapshot | None, summary: SummaryBuilder, out: list[str]
    ) -> list[ManifestFile]:
        manifests = self._parent_manifests(parent)
        target = int(base.properties.get(TARGET_SIZE, str(DEFAULT_TARGET_SIZE)))
        kept = [m for m in manifests if m.content != ManifestContent.DATA]
        by_spec: dict[int, list[ManifestFile]] = {}
        for m in manifests:
            if m.content == ManifestContent.DATA:
                by_spec.setdefault(m.partition_spec_id, []).append(m)
        created: list[ManifestFile] = []
        replaced = 0
        for spec_id, group in sorted(by_spec.items()):
            if len(group) == 1 and group[0].manifest_length <= target:
                kept.extend(group)
                continue
            created += self._cluster(base, spec_id, group, target, out)
            replaced += len(group)
        self.set("manifests-created", str(len(created)))
        self.set("manifests-kept", str(len(kept)))
        self.set("manifests-replaced", str(replaced))
        return created + kept

    def _cluster(
        self,
        base: TableMetadata,
        spec_id: int,
        group: Sequence[ManifestFile],
        target: int,
        out: list[str],
    ) -> list[ManifestFile]:
        entries: list[ManifestEntry] = []
        size = 0
        for m in group:
            entries += [e for e in self._entries(m, base) if e.is_live]
            size += m.manifest_length
        per_entry = max(1, size // max(1, len(entries)))
        per_manifest = max(1, target // per_entry)
        entries.sort(key=lambda e: _sort_key(e.data_file.partition))
        result = []
        for start in range(0, len(entries), per_manifest):
            writer = self._new_manifest(base, spec_id, ManifestContent.DATA, out)
            for e in entries[start : start + per_manifest]:
                writer.existing(e)
            result.append(writer.close())
        return result


def _sort_key(partition: tuple[Any, ...]) -> tuple[tuple[bool, str, Any], ...]:
    """Nulls last; values of mixed types never compared with each other."""
    return tuple((v is None, type(v).__name__, v if v is not None else 0) for v in partition)
