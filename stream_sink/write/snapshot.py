"""The one translator from a WriteResult to a snapshot, used by ``IcebergTable.append``
(through :func:`commit_write_result`) and by the streaming committer
(``stream_sink.commit.iceberg.table_commit``).

Invariants:
- No delete files: one append (``table.new_append``: Java's newAppend, merging small
  manifests unless ``commit.manifest-merge.enabled=false``, which keeps the manifest
  list short over many commits). Delete files: one row delta. Partition replacement
  only when the caller asks for it (the sink's overwrite mode); it refuses nothing here,
  the caller refuses delete files before.
- The row delta validates that every data file its position deletes point at still
  exists since the table state the writers started from, unless the caller says why it
  need not (``validate_referenced=False``).
- One producer, one snapshot; an empty result still makes a snapshot (the caller
  decides whether to commit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from stream_sink.table.operations import SnapshotProducer, branch_head
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

Operation = Literal["append", "row-delta", "replace-partitions"]


def snapshot_producer(
    table: Table,
    result: WriteResult,
    *,
    branch: str = MAIN_BRANCH,
    operation: Operation | None = None,
    validate_referenced: bool = True,
    starting_snapshot_id: int | None = None,
) -> SnapshotProducer:
    """The uncommitted snapshot that adds ``result`` to ``branch``.

    A truncating ``result`` (``WriteResult.truncate``) is always a row delta that also
    removes every data and delete file live on the branch it is committed on.

    ``operation``: None picks append without delete files and row delta with them.
    ``starting_snapshot_id``: the branch head the writers saw (default: the head now),
    from which the data files referenced by position deletes must still exist.
    """
    op = operation or ("row-delta" if result.delete_files or result.truncate else "append")
    if result.truncate and op != "row-delta":
        raise ValueError(f"a truncating write result commits as a row delta, not {op}")
    if op == "append":
        return table.new_append(branch).append_files(result.data_files)
    if op == "replace-partitions":
        replace = table.new_replace_partitions(branch)
        for f in (*result.data_files, *result.delete_files):
            replace.add_file(f)
        return replace
    delta = table.new_row_delta(branch)
    if result.truncate:
        delta.remove_all_files()
    for f in result.data_files:
        delta.add_rows(f)
    for f in result.delete_files:
        delta.add_deletes(f)
    if validate_referenced:
        if starting_snapshot_id is None:
            head = branch_head(table.metadata, branch)
            starting_snapshot_id = head.snapshot_id if head else None
        delta.validate_data_files_exist(result.referenced_data_files, starting_snapshot_id)
    return delta


def commit_write_result(
    table: Table,
    result: WriteResult,
    *,
    snapshot_properties: Mapping[str, str] | None = None,
    branch: str = MAIN_BRANCH,
    starting_snapshot_id: int | None = None,
) -> Snapshot:
    """Commit ``result`` to ``branch`` of ``table`` as one snapshot; returns it."""
    producer = snapshot_producer(
        table, result, branch=branch, starting_snapshot_id=starting_snapshot_id
    )
    return producer.set_all(dict(snapshot_properties or {})).commit()
