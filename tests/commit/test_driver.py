"""The commit driver over real committers (no Spark): one table or several, checkpoint
intervals, the after-checkpoint hook, restore with loss checks, and the schedule seam
(phase 2 deferred: the batch is durable and staged, and a restart commits it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from harness import SCHEMA, table_rows, write_rows

from stream_sink.checkpoints import CheckpointConfig, CheckpointCoordinator, CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.commit.driver import CommitDriver
from stream_sink.commit.schedule import ScheduleMetricsSnapshot
from stream_sink.exceptions import DataLossError
from stream_sink.table.catalog import Catalog
from stream_sink.table.table import Table


def committer(
    tmp_path: Path, table: Table, operator_id: str, job_id: str = "job-1"
) -> FilesCommitter:
    return FilesCommitter(
        IcebergTarget(table),
        StateDirectory(str(tmp_path / "state" / operator_id)),
        CheckpointStorage(str(tmp_path / "checkpoints"), operator_id),
        job_id=job_id,
        operator_id=operator_id,
    )


class Deferred:
    """A schedule that holds phase 2 until ``drain`` (what a pipelined one does)."""

    def __init__(self) -> None:
        self.waiting: list[Callable[[], None]] = []

    def submit(self, checkpoint_id: int, commit: Callable[[], None]) -> None:
        self.waiting.append(commit)

    def drain(self) -> None:
        while self.waiting:
            self.waiting.pop(0)()

    def metrics(self) -> ScheduleMetricsSnapshot:
        return ScheduleMetricsSnapshot(commits_in_flight=len(self.waiting))


@pytest.fixture
def other(warehouse: Catalog) -> Table:
    return warehouse.create_table("db.u", schema=SCHEMA)


def test_a_batch_into_two_tables_commits_each_under_its_own_watermark(
    tmp_path: Path, table: Table, other: Table
) -> None:
    checkpoints: list[tuple[str, ...]] = []
    driver: CommitDriver[Table] = CommitDriver(
        after_checkpoint=lambda committed: checkpoints.append(tuple(committed))
    )
    driver.open("t", committer(tmp_path, table, "s=t"), [])
    driver.open("u", committer(tmp_path, other, "s=u"), [])
    try:
        driver.record(0, {"t": write_rows(table, [(1, "a")]), "u": write_rows(other, [(2, "b")])})
        driver.record(1, {"u": write_rows(other, [(3, "c")])})
        assert driver.watermarks() == {"t": 0, "u": 1}
        assert checkpoints == [("t", "u"), ("u",)]  # a table absent from a batch is left alone
        assert not driver.record(1, {"u": write_rows(other, [(3, "c")])})  # a replay
    finally:
        driver.close()
    assert table_rows(table) == [(1, "a")]
    assert table_rows(other) == [(2, "b"), (3, "c")]


def test_batches_wait_for_the_checkpoint_interval_and_end_input_commits_the_rest(
    tmp_path: Path, table: Table
) -> None:
    driver = CommitDriver(CheckpointCoordinator(CheckpointConfig(interval_batches=2)))
    driver.open("t", committer(tmp_path, table, "s"), [])
    try:
        for batch in range(3):
            driver.record(batch, {"t": write_rows(table, [(batch, "x")])})
        assert driver.watermark("t") == 1
        assert driver.holds("t", 2) and not driver.holds("t", 3)
        driver.end_input()
        assert driver.watermark("t") == 2
    finally:
        driver.close()
    assert table_rows(table) == [(0, "x"), (1, "x"), (2, "x")]


def test_a_deferred_commit_is_durable_when_the_batch_returns_and_restore_commits_it(
    tmp_path: Path, table: Table
) -> None:
    schedule = Deferred()
    driver = CommitDriver(schedule=schedule)
    driver.open("t", committer(tmp_path, table, "s"), [])
    driver.record(0, {"t": write_rows(table, [(1, "a")])})
    assert schedule.waiting and driver.committer("t").staged_checkpoints == {0: (0,)}
    assert table_rows(table) == []
    schedule.waiting.clear()  # the process dies before phase 2 ran
    driver.close()

    again = CommitDriver()
    again.open("t", committer(tmp_path, table, "s"), [0])
    try:
        assert again.watermark("t") == 0
    finally:
        again.close()
    assert table_rows(table) == [(1, "a")]


def test_the_next_call_waits_for_the_commit_in_flight(tmp_path: Path, table: Table) -> None:
    schedule = Deferred()
    driver = CommitDriver(schedule=schedule)
    driver.open("t", committer(tmp_path, table, "s"), [])
    try:
        driver.record(0, {"t": write_rows(table, [(1, "a")])})
        driver.record(1, {"t": write_rows(table, [(2, "b")])})  # drains batch 0's commit
        assert table_rows(table) == [(1, "a")]
        assert driver.holds("t", 1)  # drains batch 1's
        assert table_rows(table) == [(1, "a"), (2, "b")]
    finally:
        driver.close()


def test_open_refuses_an_acknowledged_batch_nothing_accounts_for(
    tmp_path: Path, table: Table
) -> None:
    driver = CommitDriver()
    with pytest.raises(DataLossError, match="3"):
        driver.open("t", committer(tmp_path, table, "s"), [0, 1, 2, 3])
    assert driver.names == ()
    driver.open("t", committer(tmp_path, table, "s"), [])  # the state was released
    driver.close()
