"""An append stream driven through the committer (no Spark), run as a subprocess.

``python append_driver.py ROOT TABLE BATCHES``: restores the committer of sink ``sink``
(job ``query-1``) on Hadoop table ``TABLE`` of ``ROOT/wh``, resumes after the last batch
its commit log (``ROOT/commits``, written once a batch returns, like Spark's) acknowledges,
and appends batches up to ``BATCHES - 1``, one checkpoint each. Batch ``b`` holds ids
``10*b .. 10*b+9``. ``STREAM_SINK_FAILPOINT`` kills it on the spot.
"""

from __future__ import annotations

import os
import sys

import pyarrow as pa

from stream_sink.catalogs import load_catalog
from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.commit.driver import end_input
from stream_sink.write.writer_factory import TaskWriterFactory

JOB_ID = "query-1"
SINK = "sink"
ROWS = 10


def batch(b: int) -> pa.Table:
    ids = list(range(b * ROWS, (b + 1) * ROWS))
    return pa.table(
        {"id": ids, "data": [f"b{b}" for _ in ids]},
        schema=pa.schema(
            [pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())]
        ),
    )


def acknowledge(commits: str, batch_id: int) -> None:
    path = os.path.join(commits, str(batch_id))
    with open(path + ".tmp", "w") as f:
        f.write("{}")
        f.flush()
        os.fsync(f.fileno())
    os.rename(path + ".tmp", path)


def main(root: str, name: str, batches: int) -> None:
    commits = os.path.join(root, "commits")
    os.makedirs(commits, exist_ok=True)
    acked = sorted(int(n) for n in os.listdir(commits) if n.isdigit())
    table = load_catalog("c", type="hadoop", warehouse=os.path.join(root, "wh")).load_table(name)
    committer = FilesCommitter(
        IcebergTarget(table),
        StateDirectory(os.path.join(root, "state", SINK), kind="rocksdb"),
        CheckpointStorage(os.path.join(root, "checkpoints"), SINK),
        job_id=JOB_ID,
        operator_id=SINK,
    )
    committer.restore(acknowledged_batch_ids=acked)
    for b in range((acked[-1] + 1) if acked else 0, batches):
        writer = TaskWriterFactory.for_table(table).create(partition_id=0, task_id=b)
        writer.write(batch(b))
        committer.process(b, writer.complete())
        committer.snapshot_state(b)
        committer.complete_checkpoint(b)
        committer.notify_checkpoint_complete(b)
        acknowledge(commits, b)
    end_input(committer)
    committer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
