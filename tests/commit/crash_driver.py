"""A streaming driver run as a subprocess by the crash tests (no Spark).

``python crash_driver.py ROOT BACKEND INTERVAL [SCHEDULE [CHANGELOG]]``: reads the durable commit
log (``ROOT/commits/<batch>``, written after each batch returns, like Spark's
``commits/``), restores the committer, re-runs the source from the last acknowledged
batch + 1, and checkpoints every INTERVAL batches. ``STREAM_SINK_FAILPOINT`` kills it on
the spot. SCHEDULE ``pipelined`` drives the committer through the commit driver with the
pipelined schedule: each table commit runs on a background thread while the next batch
is written (and acknowledged before its commit ends), so a failpoint of phase 2 kills
the process with a commit in flight. CHANGELOG names one of ``changelog.CHANGELOGS``
(``truncating``: batches with TRUNCATEs of the source table; ``long``: 80 batches of
inserts, updates and deletes). A file ``ROOT/deletes`` holding ``positions`` makes the
target commit deletes by position (``deletes=``). ``STREAM_SINK_DRIVER_PAUSE_S`` pauses
that many seconds after each synchronous batch (a source that is not always busy);
``STREAM_SINK_DRIVER_CATALOG`` (``load_catalog`` arguments as JSON; default: the Hadoop
catalog under ROOT/warehouse) and ``STREAM_SINK_DRIVER_TABLE`` (default ``db.cdc``) name
the table.
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from changelog import CHANGELOGS, LONG_BATCHES, write_changes

from stream_sink.catalogs import load_catalog
from stream_sink.checkpoints import (
    CheckpointConfig,
    CheckpointCoordinator,
    CheckpointStorage,
)
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory, failpoint
from stream_sink.commit.driver import CommitDriver, end_input
from stream_sink.commit.failpoints import AFTER_DATA_FILES
from stream_sink.commit.schedule import Pipelined
from stream_sink.table.table import Table

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


def main(root: str, backend: str, interval: int, schedule: str, changelog: str) -> None:
    batches = LONG_BATCHES if changelog == "long" else CHANGELOGS[changelog]
    commits = os.path.join(root, "commits")
    os.makedirs(commits, exist_ok=True)
    acked = sorted(int(n) for n in os.listdir(commits) if n.isdigit())
    props = {"type": "hadoop", "warehouse": os.path.join(root, "warehouse")}
    props = json.loads(os.environ.get("STREAM_SINK_DRIVER_CATALOG") or json.dumps(props))
    catalog = load_catalog("c", **props)
    name = os.environ.get("STREAM_SINK_DRIVER_TABLE", "db.cdc")
    table = catalog.load_table(name)
    # pipelined, the commits go through a table handle of their own
    committed = catalog.load_table(name) if schedule == "pipelined" else table
    marker = os.path.join(root, "deletes")
    deletes = "equality"
    if os.path.exists(marker):
        with open(marker) as f:
            deletes = f.read().strip()
    committer = FilesCommitter(
        IcebergTarget(committed, deletes=deletes),
        StateDirectory(os.path.join(root, "state", SINK), kind=backend),  # type: ignore[arg-type]
        CheckpointStorage(os.path.join(root, "checkpoints"), SINK),
        job_id=JOB_ID,
        operator_id=SINK,
    )
    coordinator = CheckpointCoordinator(CheckpointConfig(interval_batches=interval))
    if schedule == "pipelined":
        driver = CommitDriver(coordinator, schedule=Pipelined())
        pipelined(table, commits, acked, driver, committer, batches)
        return
    committer.restore(acknowledged_batch_ids=acked)
    pause = float(os.environ.get("STREAM_SINK_DRIVER_PAUSE_S", "0"))
    for batch_id in range((acked[-1] + 1) if acked else 0, len(batches)):
        result = write_changes(table, batches[batch_id])
        failpoint(AFTER_DATA_FILES)
        committer.process(batch_id, result)
        if coordinator.on_batch(batch_id, int(time.time() * 1000)):
            committer.snapshot_state(batch_id)
            committer.complete_checkpoint(batch_id)
            committer.notify_checkpoint_complete(batch_id)
        acknowledge(commits, batch_id)
        time.sleep(pause)
    end_input(committer)
    committer.close()


def pipelined(
    table: Table,
    commits: str,
    acked: list[int],
    driver: CommitDriver,
    committer: FilesCommitter,
    batches: list,
) -> None:
    driver.open(SINK, committer, acked)
    for batch_id in range((acked[-1] + 1) if acked else 0, len(batches)):
        driver.record(batch_id, {SINK: write_changes(table, batches[batch_id])})
        acknowledge(commits, batch_id)  # with the batch's commit still in flight
    driver.end_input()
    driver.close()


if __name__ == "__main__":
    args = [*sys.argv[1:], "synchronous", "plain"][:5]
    if len(sys.argv) > 4:
        args[3:5] = [*sys.argv[4:], "plain"][:2]
    main(args[0], args[1], int(args[2]), args[3], args[4])
