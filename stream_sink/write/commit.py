"""Committing a WriteResult to a table without Spark (tests, scripts, ``Table.append``).

Invariants:
- A result without delete files is one append (``table.new_append``: Java's newAppend,
  merging small manifests unless ``commit.manifest-merge.enabled=false``, which
  keeps the manifest list short over many commits); with delete files it is one row
  delta whose validation refuses the commit if a data file its position deletes
  point at was removed after the table state the writers started from.
- One call, one snapshot; an empty result still makes a snapshot (the caller decides
  whether to call).
"""

from __future__ import annotations

from collections.abc import Mapping

from stream_sink.table.operations import branch_head
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult


def commit_write_result(
    table: Table,
    result: WriteResult,
    *,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = MAIN_BRANCH,
    starting_snapshot_id: int | None = None,
) -> Snapshot:
    """Commit ``result`` to ``branch`` of ``table``; returns the new snapshot.

    ``starting_snapshot_id``: the branch head the writers saw (default: the head
    when this is called), from which referenced data files must still exist.
    """
    props = dict(snapshot_properties or {})
    if not result.delete_files:
        return table.new_append(branch).set_all(props).append_files(result.data_files).commit()
    if starting_snapshot_id is None:
        head = branch_head(table.metadata, branch)
        starting_snapshot_id = head.snapshot_id if head else None
    delta = table.new_row_delta(branch).set_all(props)
    for f in result.data_files:
        delta.add_rows(f)
    for f in result.delete_files:
        delta.add_deletes(f)
    delta.validate_data_files_exist(result.referenced_data_files, starting_snapshot_id)
    return delta.commit()
