"""The crash driver of ``crash_driver.py`` against a Delta table (no Spark).

``python delta_crash_driver.py ROOT BACKEND INTERVAL``: the scripted changelog is merged
copy-on-write into the Delta table at ``ROOT/lake``; each batch is committed before the
next is planned (a MERGE reads the table it rewrites), the commit log
``ROOT/commits/<batch>`` is written after each batch returns, and
``STREAM_SINK_FAILPOINT`` kills the process on the spot.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa
from changelog import BATCHES
from crash_driver import acknowledge

from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, StateDirectory, failpoint
from stream_sink.commit.delta_target import DeltaTarget
from stream_sink.commit.failpoints import AFTER_DATA_FILES
from stream_sink.delta import DeltaTable
from stream_sink.delta.merge import copy_on_write

JOB_ID = "query-1"
SINK = "cdc"


def changes(batch_id: int) -> pa.Table:
    rows = BATCHES[batch_id]
    return pa.table({
        "id": pa.array([c[1] for c in rows], pa.int64()),
        "data": [c[2] for c in rows],
        "_row_kind": [c[0] for c in rows],
    })  # fmt: skip


def main(root: str, backend: str) -> None:
    commits = os.path.join(root, "commits")
    os.makedirs(commits, exist_ok=True)
    acked = sorted(int(n) for n in os.listdir(commits) if n.isdigit())
    table = DeltaTable.load(os.path.join(root, "lake"))
    committer = FilesCommitter(
        DeltaTarget(table),
        StateDirectory(os.path.join(root, "state", SINK), kind=backend),  # type: ignore[arg-type]
        CheckpointStorage(os.path.join(root, "checkpoints"), SINK),
        job_id=JOB_ID,
        operator_id=SINK,
    )
    committer.restore(acknowledged_batch_ids=acked)
    for batch_id in range((acked[-1] + 1) if acked else 0, len(BATCHES)):
        result = copy_on_write(table.refresh().snapshot, table.io, changes(batch_id), ["id"],
                               "changelog", row_kind_column="_row_kind")  # fmt: skip
        failpoint(AFTER_DATA_FILES)
        committer.process(batch_id, result)
        committer.snapshot_state(batch_id)
        committer.complete_checkpoint(batch_id)
        committer.notify_checkpoint_complete(batch_id)
        acknowledge(commits, batch_id)
    committer.end_input()
    committer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
