"""Removing dangling delete files: delete files that can apply to no live data file.

With ``d`` the lowest data sequence number of the live data files in a delete
file's scope (its partition; every partition for an unpartitioned equality delete):
- a position delete file naming one data file dangles when that file is not live;
  another one when its sequence number is below ``d`` (position deletes apply to
  ``d <= x``), or its partition has no data file left;
- an equality delete file dangles when its sequence number is at most ``d``
  (equality deletes apply to ``d < x``), or its scope has no data file left.

Invariant: the commit is validated from the snapshot the files were found in; data
committed afterwards has higher sequence numbers (or comes from a compaction of
files that were in scope), so nothing found dangling can apply to it.
"""

from __future__ import annotations

import time
from typing import Any

from stream_sink.maintenance.inventory import Inventory, LiveFile, file_scoped_target, inventory
from stream_sink.maintenance.results import RemoveDanglingDeletesResult
from stream_sink.table.manifest import DataFile, DataFileContent
from stream_sink.table.table import Table

PartitionKey = tuple[int, tuple[Any, ...]]


def dangling_delete_files(table: Table, inv: Inventory) -> list[DataFile]:
    live = {f.path for f in inv.data}
    min_seq: dict[PartitionKey, int] = {}
    for f in inv.data:
        key = _key(f)
        min_seq[key] = min(min_seq.get(key, f.sequence_number), f.sequence_number)
    global_min = min(min_seq.values(), default=None)
    out = []
    for d in inv.deletes:
        if _dangles(table, d, live, min_seq, global_min):
            out.append(d.data_file)
    return out


def _dangles(
    table: Table,
    d: LiveFile,
    live: set[str],
    min_seq: dict[PartitionKey, int],
    global_min: int | None,
) -> bool:
    f = d.data_file
    if f.content == DataFileContent.POSITION_DELETES:
        target = file_scoped_target(f)
        if target is not None:
            return target not in live
        lowest = min_seq.get(_key(d))
        return lowest is None or d.sequence_number < lowest
    if table.metadata.spec_by_id(f.spec_id).is_unpartitioned:
        lowest = global_min
    else:
        lowest = min_seq.get(_key(d))
    return lowest is None or d.sequence_number <= lowest


def remove_dangling_deletes(table: Table) -> RemoveDanglingDeletesResult:
    started = time.perf_counter()
    table.refresh()
    snapshot = table.current_snapshot()
    dangling = dangling_delete_files(table, inventory(table, snapshot))
    if snapshot is None or not dangling:
        return RemoveDanglingDeletesResult(None, 0, (time.perf_counter() - started) * 1000)
    op = table.new_rewrite()
    op.rewrite_files((), (), deletes_to_remove=dangling)
    op.validate_from_snapshot(snapshot.snapshot_id)
    committed = op.commit()
    return RemoveDanglingDeletesResult(
        committed.snapshot_id, len(dangling), (time.perf_counter() - started) * 1000
    )


def _key(f: LiveFile) -> PartitionKey:
    return (f.data_file.spec_id, tuple(f.data_file.partition))
