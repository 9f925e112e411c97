"""A minimal compaction for tests of the rewrite operation: read the live rows of a
snapshot with our reader (deletes applied), write them again through the real task
writers, and hand back what a rewrite needs. The real compaction (bin-packing,
per-partition planning) is ``stream_sink.maintenance``'s."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from stream_sink.table.manifest import DataFile, read_manifest, read_manifest_list
from stream_sink.table.snapshots import Snapshot
from stream_sink.tables import IcebergTable
from stream_sink.write.writer_factory import TaskWriterFactory


@dataclass(frozen=True)
class Planned:
    """A compaction of every live file of ``snapshot``, its new files already written."""

    snapshot: Snapshot
    data_files: tuple[DataFile, ...]
    delete_files: tuple[DataFile, ...]
    new_files: tuple[DataFile, ...]


def live_files(table: IcebergTable, snapshot: Snapshot) -> list[DataFile]:
    meta = table.metadata
    out = []
    for m in read_manifest_list(table.io, snapshot.manifest_list):
        ptype = meta.spec_by_id(m.partition_spec_id).partition_type(meta.schema)
        out += [e.data_file for e in read_manifest(table.io, m, ptype) if e.is_live]
    return out


def plan_compaction(table: IcebergTable) -> Planned:
    """Rewrite all live rows of the current snapshot into new files (not committed)."""
    snap = table.refresh().current_snapshot()
    assert snap is not None
    files = live_files(table, snap)
    rows: pa.Table = table.scan(snapshot_id=snap.snapshot_id).to_arrow()
    writer = TaskWriterFactory.for_table(table).create(partition_id=0, task_id=0)
    writer.write(rows)
    result = writer.complete()
    return Planned(
        snapshot=snap,
        data_files=tuple(f for f in files if not f.is_delete),
        delete_files=tuple(f for f in files if f.is_delete),
        new_files=tuple(result.data_files),
    )


def commit_compaction(
    table: IcebergTable, plan: Planned, use_starting_sequence_number: bool
) -> Snapshot:
    """Commit ``plan`` as a rewrite validated from the planned snapshot."""
    rewrite = (
        table.new_rewrite()
        .rewrite_files(plan.data_files, plan.new_files, plan.delete_files, ())
        .validate_from_snapshot(plan.snapshot.snapshot_id)
    )
    if use_starting_sequence_number:
        rewrite.data_sequence_number(plan.snapshot.sequence_number)
    return rewrite.commit()
