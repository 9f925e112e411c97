"""A streaming driver run as a subprocess by the crash tests (no Spark).

``python crash_driver.py ROOT BACKEND INTERVAL``: reads the durable commit log
(``ROOT/commits/<batch>``, written after each batch returns, like Spark's ``commits/``),
restores the committer, re-runs the source from the last acknowledged batch + 1, and
checkpoints every INTERVAL batches. ``STREAM_SINK_FAILPOINT`` kills it on the spot.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from changelog import BATCHES, write_changes

from stream_sink.catalogs import load_catalog
from stream_sink.checkpoints import (
    CheckpointConfig,
    CheckpointCoordinator,
    CheckpointStorage,
)
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory, failpoint
from stream_sink.commit.driver import end_input
from stream_sink.commit.failpoints import AFTER_DATA_FILES

JOB_ID = "query-1"
SINK = "cdc"


def acknowledge(commits: str, batch_id: int) -> None:
    path = os.path.join(commits, str(batch_id))
    with open(path + ".tmp", "w") as f:
        f.write("{}")
        f.flush()
        os.fsync(f.fileno())
    os.rename(path + ".tmp", path)
    fd = os.open(commits, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main(root: str, backend: str, interval: int) -> None:
    commits = os.path.join(root, "commits")
    os.makedirs(commits, exist_ok=True)
    acked = sorted(int(n) for n in os.listdir(commits) if n.isdigit())
    table = load_catalog("c", type="hadoop", warehouse=os.path.join(root, "warehouse")).load_table(
        "db.cdc"
    )
    committer = FilesCommitter(
        IcebergTarget(table),
        StateDirectory(os.path.join(root, "state", SINK), kind=backend),  # type: ignore[arg-type]
        CheckpointStorage(os.path.join(root, "checkpoints"), SINK),
        job_id=JOB_ID,
        operator_id=SINK,
    )
    committer.restore(acknowledged_batch_ids=acked)
    coordinator = CheckpointCoordinator(CheckpointConfig(interval_batches=interval))
    for batch_id in range((acked[-1] + 1) if acked else 0, len(BATCHES)):
        result = write_changes(table, BATCHES[batch_id])
        failpoint(AFTER_DATA_FILES)
        committer.process(batch_id, result)
        if coordinator.on_batch(batch_id, int(time.time() * 1000)):
            committer.snapshot_state(batch_id)
            committer.complete_checkpoint(batch_id)
            committer.notify_checkpoint_complete(batch_id)
        acknowledge(commits, batch_id)
    end_input(committer)
    committer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
