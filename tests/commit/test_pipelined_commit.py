"""The pipelined commit without Spark: the ``Pipelined`` schedule on its own, then the
commit driver over real committers and tables with it.

A batch returns once it is staged; its table commit runs on a background thread; the
driver's next call waits for it. At most one commit is in flight, a failed commit stops
the next call and loses nothing (a restart commits what was staged), and end of input and
close leave every batch committed, stamped exactly as the synchronous commit stamps it.
A process killed with a commit in flight: ``test_crash_recovery.py`` (pipelined
scenarios).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import SCHEMA, duckdb_read, table_rows, write_rows
from kill_harness import assert_committed_once, iceberg_marks

from stream_sink.checkpoints import CheckpointConfig, CheckpointCoordinator, CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.commit.driver import CommitDriver
from stream_sink.commit.schedule import Pipelined, Synchronous, check_commit_mode, schedule_for
from stream_sink.exceptions import CommitFailedError, InvalidOptionError
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.table.catalog import Catalog
from stream_sink.table.table import Table

# --- the schedule on its own --------------------------------------------------------------


def test_submit_waits_for_the_commit_in_flight_so_commits_never_overlap() -> None:
    schedule = Pipelined()
    running, ended, overlap = [0], [], []
    lock = threading.Lock()

    def commit(n: int) -> Callable[[], None]:
        def run() -> None:
            with lock:
                running[0] += 1
                overlap.append(running[0])
            threading.Event().wait(0.002)  # long enough for a second thread to start
            with lock:
                running[0] -= 1
                ended.append(n)

        return run

    for n in range(20):
        schedule.submit(n, commit(n))
        assert ended[:n] == list(range(n))  # every earlier commit ended before this began
    schedule.drain()
    assert ended == list(range(20)) and max(overlap) == 1


def test_a_commit_in_flight_is_reported_and_the_wait_for_it_is_measured() -> None:
    schedule, release = Pipelined(), threading.Event()
    assert schedule.metrics().commits_in_flight == 0
    assert schedule.metrics().last_commit_wait_ms is None
    schedule.submit(0, release.wait)
    assert schedule.metrics().commits_in_flight == 1
    threading.Timer(0.01, release.set).start()
    schedule.drain()
    after = schedule.metrics()
    assert after.commits_in_flight == 0
    assert after.last_commit_wait_ms is not None and after.commit_wait_ms_total > 0


def test_a_failed_commit_is_raised_once_by_the_next_call_naming_its_checkpoint() -> None:
    schedule = Pipelined()

    def fail() -> None:
        raise CommitFailedError("the catalog refused the swap")

    schedule.submit(7, fail)
    with pytest.raises(CommitFailedError, match="refused") as raised:
        schedule.submit(8, lambda: None)  # not started: the failure comes first
    assert any("checkpoint 7" in note for note in getattr(raised.value, "__notes__", []))
    schedule.drain()  # raised once; the schedule is usable again
    ran: list[int] = []
    schedule.submit(9, lambda: ran.append(9))
    schedule.drain()
    assert ran == [9]


def test_commit_modes_are_checked_by_name() -> None:
    assert isinstance(schedule_for("synchronous"), Synchronous)
    assert isinstance(schedule_for("pipelined"), Pipelined)
    with pytest.raises(InvalidOptionError, match=r"'async'.*'synchronous'.*'pipelined'"):
        check_commit_mode("async", where="sink s")


# --- the driver over real committers ------------------------------------------------------


class FailingTarget(IcebergTarget):
    """An Iceberg table whose next ``failures`` commits fail before the catalog is asked."""

    failures = 0

    def commit(self, group, job_id, operator_id, metrics: CommitterMetrics):  # type: ignore[no-untyped-def]
        if FailingTarget.failures:
            FailingTarget.failures -= 1
            raise CommitFailedError(f"{self.name}: the catalog is unreachable")
        return super().commit(group, job_id, operator_id, metrics)


def committer(tmp_path: Path, table: Table, sink: str = "s") -> FilesCommitter:
    return FilesCommitter(
        FailingTarget(table),
        StateDirectory(str(tmp_path / "state" / sink)),
        CheckpointStorage(str(tmp_path / "checkpoints"), sink),
        job_id="job-1",
        operator_id=sink,
    )


def open_driver(
    tmp_path: Path, table: Table, acknowledged: list[int], sink: str = "s", **kwargs: object
) -> CommitDriver:
    driver = CommitDriver(**kwargs)  # type: ignore[arg-type]
    driver.open("t", committer(tmp_path, table, sink), acknowledged)
    return driver


@pytest.fixture(autouse=True)
def _no_failures() -> None:
    FailingTarget.failures = 0


def test_a_batch_returns_staged_and_the_next_call_finds_it_committed(
    tmp_path: Path, table: Table
) -> None:
    driver = open_driver(tmp_path, table, [], schedule=Pipelined())
    try:
        driver.record(0, {"t": write_rows(table, [(1, "a")])})
        driver.record(1, {"t": write_rows(table, [(2, "b")])})  # waits for batch 0's commit
        assert 0 in iceberg_marks(table.refresh())
        driver.end_input()  # waits for batch 1's
        assert driver.watermark("t") == 1
    finally:
        driver.close()
    assert table_rows(table.refresh()) == [(1, "a"), (2, "b")]


def test_pipelined_commits_stamp_the_table_as_synchronous_ones_do(
    tmp_path: Path, warehouse: Catalog, table: Table
) -> None:
    """The same batches, checkpoints every 2 batches, through both schedules: the same
    rows and the same watermark in every snapshot summary, read by DuckDB too."""
    other = warehouse.create_table("db.u", schema=SCHEMA, identifier_fields=["id"])
    for target, schedule in ((table, Synchronous()), (other, Pipelined())):
        coordinator = CheckpointCoordinator(CheckpointConfig(interval_batches=2))
        driver = open_driver(
            tmp_path, target, [], sink=target.name, coordinator=coordinator, schedule=schedule
        )
        try:
            for batch in range(5):
                driver.record(batch, {"t": write_rows(target, [(batch, f"v{batch}")])})
            driver.end_input()
        finally:
            driver.close()
    assert iceberg_marks(other.refresh()) == iceberg_marks(table.refresh()) == [1, 3, 4]
    assert table_rows(other) == table_rows(table) == [(b, f"v{b}") for b in range(5)]
    assert sorted(duckdb_read(other.metadata_location)) == table_rows(table)


def test_the_driver_reports_the_commit_in_flight_and_the_wait(tmp_path: Path, table: Table) -> None:
    driver = open_driver(tmp_path, table, [], schedule=Pipelined())
    try:
        driver.record(0, {"t": write_rows(table, [(1, "a")])})
        driver.drain()
        m = driver.metrics()["t"]
        assert m.commits_in_flight == 0 and m.commits == 1
        assert m.last_commit_wait_ms is not None
    finally:
        driver.close()


def test_a_failed_background_commit_stops_the_next_batch_and_a_restart_loses_nothing(
    tmp_path: Path, table: Table
) -> None:
    driver = open_driver(tmp_path, table, [], schedule=Pipelined())
    FailingTarget.failures = 1
    driver.record(0, {"t": write_rows(table, [(1, "a")])})  # returns: batch 0 is staged
    with pytest.raises(CommitFailedError, match="unreachable"):
        driver.record(1, {"t": write_rows(table, [(2, "b")])})  # the query stops here
    driver.close()
    assert table_rows(table.refresh()) == []

    # upstream acknowledged batch 0 (its batch returned) but not batch 1: the restart
    # commits the staged batch 0, then batch 1 runs again
    again = open_driver(tmp_path, table, [0], schedule=Pipelined())
    try:
        assert again.watermark("t") == 0
        again.record(1, {"t": write_rows(table, [(2, "b")])})
        again.end_input()
    finally:
        again.close()
    assert table_rows(table.refresh()) == [(1, "a"), (2, "b")]
    assert_committed_once(iceberg_marks(table))


def test_end_of_input_raises_a_failed_last_commit_and_close_leaves_it_staged(
    tmp_path: Path, table: Table
) -> None:
    driver = open_driver(tmp_path, table, [], schedule=Pipelined())
    FailingTarget.failures = 1
    driver.record(0, {"t": write_rows(table, [(1, "a")])})
    with pytest.raises(CommitFailedError):
        driver.end_input()
    driver.close()  # never raises
    again = open_driver(tmp_path, table, [0], schedule=Pipelined())
    again.close()
    assert table_rows(table.refresh()) == [(1, "a")]


def test_close_waits_for_the_commit_in_flight(tmp_path: Path, table: Table) -> None:
    """A query that stops cleanly leaves every batch committed."""
    driver = open_driver(tmp_path, table, [], schedule=Pipelined())
    driver.record(0, {"t": write_rows(table, [(1, "a")])})
    driver.close()
    assert table_rows(table.refresh()) == [(1, "a")]
    assert_committed_once(iceberg_marks(table))
