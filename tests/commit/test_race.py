"""Two committer instances of the same (job, operator) racing on one table (e.g. a zombie
driver and its replacement, each with its own state): no batch is committed twice."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Literal

import pytest
from harness import live_files, table_rows, upsert_result, write_rows

from stream_sink.commit import (
    JOB_ID,
    MAX_COMMITTED_CHECKPOINT_ID,
    FilesCommitter,
    IcebergTarget,
    StateDirectory,
)
from stream_sink.commit.iceberg.watermark import OPERATOR_ID
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

BATCHES = 8


def run_instance(
    table: Table,
    state: StateDirectory,
    barrier: threading.Barrier,
    upserts: bool,
    errors: list[BaseException],
) -> None:
    try:
        mine = table.catalog.load_table(table.identifier)
        committer = FilesCommitter(IcebergTarget(mine), state, None, job_id="q", operator_id="sink")
        committer.restore()
        for b in range(BATCHES):
            rows = [(b, "x"), (100, f"latest-{b}")]
            result: WriteResult = upsert_result(mine, rows) if upserts else write_rows(mine, rows)
            committer.process(b, result)
            committer.snapshot_state(b)
            barrier.wait(timeout=60)  # both notify at the same moment
            committer.notify_checkpoint_complete(b)
        committer.close()
    except BaseException as e:  # reported by the test
        errors.append(e)
        barrier.abort()


@pytest.mark.parametrize("upserts", [False, True], ids=["append", "row-delta"])
def test_racing_instances_commit_each_batch_once(
    table: Table, tmp_path: Path, backend: str, upserts: bool
) -> None:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    kinds: list[Literal["rocksdb", "memory"]] = (
        ["memory", "rocksdb"] if backend == "memory" else ["rocksdb", "rocksdb"]
    )
    threads = [
        threading.Thread(
            target=run_instance,
            args=(
                table,
                StateDirectory(str(tmp_path / f"state-{i}"), kind=kind, sync=False),
                barrier,
                upserts,
                errors,
            ),
        )
        for i, kind in enumerate(kinds)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors

    rows = table_rows(table)
    if upserts:
        assert rows == [*[(b, "x") for b in range(BATCHES)], (100, f"latest-{BATCHES - 1}")]
    else:
        assert sorted({r[0] for r in rows if r[0] < 100}) == list(range(BATCHES))
        assert len(rows) == 2 * BATCHES, "a batch was committed twice"
    paths = [f.file_path for f in live_files(table)]
    assert len(paths) == len(set(paths))
    stamps = [
        int(s.summary[MAX_COMMITTED_CHECKPOINT_ID])
        for s in table.refresh().snapshots()
        if s.summary.get(JOB_ID) == "q" and s.summary.get(OPERATOR_ID) == "sink"
    ]
    assert stamps == sorted(set(stamps)), f"overlapping commits: {stamps}"
    # the losers' files were deleted: every data file on disk is live
    on_disk = {
        os.path.join(root, n)
        for root, _, names in os.walk(table.data_location)
        for n in names
        if n.endswith(".parquet")
    }
    assert on_disk == set(paths)
