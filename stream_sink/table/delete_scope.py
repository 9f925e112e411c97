"""Where an equality delete file is registered so that it reaches every row it deletes.

By the spec ("Scan Planning"), a partitioned equality delete applies only to data files
of the same partition spec and partition; one registered under an unpartitioned spec
applies to every data file of every spec. A writer routes a key's equality delete to
the key's partition under the spec it writes with, which is exact only while every
older row of that key sits in a data file of that very spec. After a partition spec
change (by this project's ``update_spec``, by Java's ``ALTER TABLE … PARTITION FIELD``,
while a sink is down or between two of its micro-batches), rows of the same key may
also live in data files of older specs, which a partitioned delete never reaches.

Rule (applied by the row delta on the metadata each commit attempt builds on, so a
spec change or a commit of another writer that lands meanwhile is always seen):

- an equality delete file stays partitioned when every live data file of the parent
  snapshot has the delete file's spec;
- otherwise it is registered under an unpartitioned spec (spec id and partition ``()``
  in its manifest entry; the file itself is unchanged: an equality delete file holds
  key rows and no partition). When the table has no spec without fields, one is added
  to the table's specs in the same metadata commit, without becoming the default.

Position deletes (and deletion vectors) always stay with the data file they name.

Invariant: after the commit, every live data file with a lower data sequence number
that may hold a key of the delete file is in the delete file's scope.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from stream_sink.table.manifest import DataFile, DataFileContent
from stream_sink.table.manifest_list import ManifestContent, ManifestFile
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.partitioning import PartitionSpec


def live_data_spec_ids(manifests: Iterable[ManifestFile]) -> set[int]:
    """Spec ids of the data manifests that may hold live data files (counts unknown:
    maybe)."""
    return {
        m.partition_spec_id
        for m in manifests
        if m.content == ManifestContent.DATA and (m.has_added_files or m.has_existing_files)
    }


def needs_global_scope(f: DataFile, live_specs: set[int], metadata: TableMetadata) -> bool:
    """Whether equality delete ``f`` must be registered under an unpartitioned spec:
    it is partitioned and some live data file has another spec."""
    if f.content != DataFileContent.EQUALITY_DELETES:
        return False
    if metadata.spec_by_id(f.spec_id).is_unpartitioned:
        return False
    return bool(live_specs - {f.spec_id})


def global_spec_id(metadata: TableMetadata) -> int | None:
    """The id of a spec without fields in ``metadata`` (the lowest), None when none."""
    ids = [s.spec_id for s in metadata.partition_specs if not s.fields]
    return min(ids) if ids else None


def with_global_spec(metadata: TableMetadata) -> tuple[TableMetadata, int]:
    """``metadata`` with a spec without fields (added, never made the default, when it
    has none) and that spec's id."""
    found = global_spec_id(metadata)
    if found is not None:
        return metadata, found
    new_id = max(s.spec_id for s in metadata.partition_specs) + 1
    specs = (*metadata.partition_specs, PartitionSpec(new_id, ()))
    return replace(metadata, partition_specs=specs), new_id


def as_global(f: DataFile, spec_id: int) -> DataFile:
    """Equality delete ``f`` registered under unpartitioned spec ``spec_id``."""
    return replace(f, spec_id=spec_id, partition=())
