"""The crash driver of ``crash_driver.py`` against a Delta table (no Spark).

``python delta_crash_driver.py ROOT BACKEND [CHANGELOG [DELETES]]``: the scripted changelog
(one of ``changelog.CHANGELOGS``, default ``plain``) is merged into the Delta table at
``ROOT/lake``, copy-on-write or (``DELETES`` ``positions``, on a table with deletion
vectors) as new rows plus keys resolved to deletion vectors at commit; each batch is
committed before the next is planned (a MERGE reads the table it rewrites), the commit log
``ROOT/commits/<batch>`` is written after each batch returns, and
``STREAM_SINK_FAILPOINT`` kills the process on the spot. A batch with a TRUNCATE writes
the net rows of the changes after its last one, as a batch that empties the table when
committed (what ``DeltaSink`` does).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa
from changelog import BATCHES, CHANGELOGS, TRUNCATE, expected_rows
from crash_driver import acknowledge

from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, StateDirectory, failpoint
from stream_sink.commit.delta.target import DeltaTarget
from stream_sink.commit.driver import end_input
from stream_sink.commit.failpoints import AFTER_DATA_FILES
from stream_sink.delta import DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.key_positions import DeltaPositionResolver, positions_batch
from stream_sink.delta.merge import copy_on_write
from stream_sink.delta.writer import write_data_files

JOB_ID = "query-1"
SINK = "cdc"


def changes(batch_id: int) -> pa.Table:
    return as_changes(BATCHES[batch_id])


def as_changes(rows: list[tuple[str, int, str]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([c[1] for c in rows], pa.int64()),
            "data": [c[2] for c in rows],
            "_row_kind": [c[0] for c in rows],
        }
    )


PAIR = [[("+U", 1, "a1"), ("+I", 3, "c")], [("-D", 2, "b"), ("+I", 4, "d")]]
"""Two batches touching disjoint keys: both may be planned on the same version."""


def pair(root: str) -> None:
    """``python delta_crash_driver.py ROOT pair``: both PAIR batches planned on one version
    and staged in ONE checkpoint, so committing it passes between-batch-commits (two
    MERGE versions, one per batch); a restart finishes whatever the kill left."""
    table = DeltaTable.load(os.path.join(root, "lake"))
    committer = FilesCommitter(
        DeltaTarget(table),
        StateDirectory(os.path.join(root, "state", SINK), kind="memory"),
        CheckpointStorage(os.path.join(root, "checkpoints"), SINK),
        job_id=JOB_ID,
        operator_id=SINK,
    )
    committer.restore()
    if committer.watermark < 0 and not committer.staged_checkpoints:
        snapshot = table.refresh().snapshot
        for batch_id, rows in enumerate(PAIR):
            merged = copy_on_write(
                snapshot,
                table.io,
                as_changes(rows),
                ["id"],
                "changelog",
                row_kind_column="_row_kind",
            )
            committer.process(batch_id, merged)
        committer.snapshot_state(1)
        committer.complete_checkpoint(1)
        committer.notify_checkpoint_complete(1)
    committer.close()


def keys_folder(table: DeltaTable) -> str:
    return f"{table.location}/_stream_sink/touched-keys/{SINK}"


def merged(table: DeltaTable, rows: list[tuple[str, int, str]], deletes: str) -> DeltaBatch:
    """The batch's copy-on-write MERGE or positions batch; after a truncate, its net rows
    into an empty table."""
    cut = [i for i, r in enumerate(rows) if r[0] == TRUNCATE]
    if not cut and deletes == "positions":
        snapshot = table.refresh().snapshot
        changes = as_changes(rows)
        folder = keys_folder(table)
        return positions_batch(
            snapshot, table.io, changes, ["id"], "changelog", folder, "_row_kind"
        )
    if not cut:
        return copy_on_write(
            table.refresh().snapshot,
            table.io,
            as_changes(rows),
            ["id"],
            "changelog",
            row_kind_column="_row_kind",
        )
    net = expected_rows([rows[cut[-1] + 1 :]])
    data = pa.table({"id": pa.array([k for k, _ in net], pa.int64()), "data": [v for _, v in net]})
    adds = write_data_files(table.location, data, table.schema, ()) if net else []
    return DeltaBatch(tuple(adds), (), truncate=True)


def main(root: str, backend: str, changelog: str = "plain", deletes: str = "copy") -> None:
    batches = CHANGELOGS[changelog]
    commits = os.path.join(root, "commits")
    os.makedirs(commits, exist_ok=True)
    acked = sorted(int(n) for n in os.listdir(commits) if n.isdigit())
    table = DeltaTable.load(os.path.join(root, "lake"))
    target = DeltaTarget(table)
    if deletes == "positions":
        resolver = DeltaPositionResolver(["id"])
        target = DeltaTarget(table, positions=resolver, keys_folder=keys_folder(table))
    committer = FilesCommitter(
        target,
        StateDirectory(os.path.join(root, "state", SINK), kind=backend),  # type: ignore[arg-type]
        CheckpointStorage(os.path.join(root, "checkpoints"), SINK),
        job_id=JOB_ID,
        operator_id=SINK,
    )
    committer.restore(acknowledged_batch_ids=acked)
    for batch_id in range((acked[-1] + 1) if acked else 0, len(batches)):
        result = merged(table, batches[batch_id], deletes)
        failpoint(AFTER_DATA_FILES)
        committer.process(batch_id, result)
        committer.snapshot_state(batch_id)
        committer.complete_checkpoint(batch_id)
        committer.notify_checkpoint_complete(batch_id)
        acknowledge(commits, batch_id)
    end_input(committer)
    committer.close()


if __name__ == "__main__":
    if sys.argv[2] == "pair":
        pair(sys.argv[1])
    else:
        main(*sys.argv[1:5])
