"""The commit protocol against a Delta table (DeltaTarget): every failpoint killed and
restarted, the crash between the version file and the state cleanup, two instances of
one appId racing, the watermark in a ``txn`` action. Tables are read back by delta-rs
and DuckDB's delta extension at every version."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from changelog import BATCHES, TRUNCATING_BATCHES, expected_rows
from delta_readers import (
    delta_rs_query_rows,
    delta_rs_rows,
    duckdb_delta_rows,
    duckdb_delta_versions,
)
from kill_harness import KillJob

from stream_sink.commit import FAILPOINTS, FilesCommitter, StateDirectory
from stream_sink.commit.delta.target import DeltaTarget, app_id
from stream_sink.delta import DeltaTable
from stream_sink.delta.merge import copy_on_write
from stream_sink.delta.writer import write_data_files
from stream_sink.ops.drill.delete_files import delta_rewrite_versions

DRIVER = str(Path(__file__).with_name("delta_crash_driver.py"))
SCHEMA = pa.schema([("id", pa.int64()), ("data", pa.string())])
APP = app_id("query-1", "cdc")
# a batch's failpoints are reached once per batch (interval 1); the 2nd hit is batch 1
SCENARIOS = [(fp, 2) for fp in FAILPOINTS if fp != "between-batch-commits"]
# a TRUNCATE of the source in batch 2 (mid-batch) and 4 (alone): killed at its 3rd hit,
# in the batch that empties the table
TRUNCATING = [(fp, 3) for fp in FAILPOINTS if fp != "between-batch-commits"]
# deletes="positions": every failpoint of a batch and the resolution's own, at the 2nd hit
POSITIONS = {
    "plain": [*SCENARIOS, ("after-position-deletes", 2)],
    "truncating": [*TRUNCATING, ("after-position-deletes", 2)],
}
DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}


def _job(
    root: Path, shape: str = "memory", changelog: str = "plain", deletes: str = "copy"
) -> KillJob:
    """``delta_crash_driver.py`` on ``root``; its stderr in ``root/driver.log``."""
    args = [str(root), shape, changelog, deletes]
    return KillJob(Path(DRIVER), args, log=root / "driver.log", timeout=120)


def _scenario(
    base: Path, failpoint: str, hit: int, changelog: str = "plain", deletes: str = "copy"
) -> tuple[Path, int, int, str]:
    root = base / f"{failpoint}@{hit}-{changelog}-{deletes}"
    configuration = DELETION_VECTORS if deletes == "positions" else None
    DeltaTable.create(str(root / "lake"), SCHEMA, configuration=configuration)
    job = _job(root, changelog=changelog, deletes=deletes)
    first, first_out = job.run(f"{failpoint}@{hit}")
    second, second_out = job.run()
    return root, first, second, first_out[-2000:] + second_out[-2000:]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple]]:
    base = tmp_path_factory.mktemp("delta-crash")
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {f"{fp}@{hit}": pool.submit(_scenario, base, fp, hit) for fp, hit in SCENARIOS}
        futures.update(
            {
                f"{fp}@{hit}-truncating": pool.submit(_scenario, base, fp, hit, "truncating")
                for fp, hit in TRUNCATING
            }
        )
        futures.update(
            {
                f"{fp}@{hit}-{changelog}-positions": pool.submit(
                    _scenario, base, fp, hit, changelog, "positions"
                )
                for changelog, scenarios in POSITIONS.items()
                for fp, hit in scenarios
            }
        )
        yield {name: f.result() for name, f in futures.items()}


def every_version_holds_its_batches(table: DeltaTable, batches: list) -> None:
    """Every batch is committed, and every version holds, for DuckDB, the state after the
    batch its txn names: no batch twice, no truncate applied twice or skipped."""
    assert table.snapshot.txn_version(APP) == len(batches) - 1
    versions = list(range(1, table.version + 1))
    for v, rows in zip(versions, duckdb_delta_versions(table.location, versions), strict=True):
        done = table.snapshot_at(v).txn_version(APP)
        assert done is not None
        assert _rows(rows) == expected_rows(batches[: done + 1])


def _rows(rows: list[dict]) -> list[tuple[int, str]]:
    return sorted((r["id"], r["data"]) for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario",
    [f"{fp}@{hit}" for fp, hit in SCENARIOS] + [f"{fp}@{hit}-truncating" for fp, hit in TRUNCATING],
)
def test_delta_killed_at_failpoint_then_restarted_holds_every_change_exactly_once(
    outcomes: dict[str, tuple], scenario: str
) -> None:
    root, first, second, err = outcomes[scenario]
    assert first == -signal.SIGKILL, f"not killed at {scenario}: rc={first}\n{err}"
    assert second == 0, err
    batches = TRUNCATING_BATCHES if scenario.endswith("-truncating") else BATCHES
    loc = str(root / "lake")
    table = DeltaTable.load(loc)
    assert _rows(table.to_arrow().to_pylist()) == expected_rows(batches)
    assert _rows(delta_rs_rows(loc)) == expected_rows(batches)
    assert _rows(duckdb_delta_rows(loc)) == expected_rows(batches)
    every_version_holds_its_batches(table, batches)
    if scenario.startswith("after-data-files"):
        return  # files written before the committer saw them are orphans by design
    # every data file on disk is live or was removed by a later version: none leaked
    on_disk = {
        os.path.relpath(os.path.join(d, n), loc)
        for d, _, names in os.walk(loc)
        for n in names
        if n.endswith(".parquet") and "_delta_log" not in d
    }
    known = set(table.snapshot.files) | set(table.snapshot.tombstones)
    assert on_disk <= known, on_disk - known


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario",
    [f"{fp}@{hit}-{c}-positions" for c, scenarios in POSITIONS.items() for fp, hit in scenarios],
)
def test_delta_positions_killed_at_failpoint_then_restarted_hold_every_change_exactly_once(
    outcomes: dict[str, tuple], scenario: str
) -> None:
    """deletes="positions": killed at every failpoint (the resolution's own included) and
    restarted, every version holds the state after its batch for delta-rs and DuckDB,
    and no version rewrote a data file: each removed file is re-added under a vector."""
    root, first, second, err = outcomes[scenario]
    assert first == -signal.SIGKILL, f"not killed at {scenario}: rc={first}\n{err}"
    assert second == 0, err
    batches = TRUNCATING_BATCHES if "-truncating-" in scenario else BATCHES
    loc = str(root / "lake")
    table = DeltaTable.load(loc)
    assert _rows(delta_rs_query_rows(loc)) == expected_rows(batches)  # applies vectors
    assert _rows(duckdb_delta_rows(loc)) == expected_rows(batches)
    every_version_holds_its_batches(table, batches)
    assert delta_rewrite_versions(loc) == []
    assert not os.listdir(os.path.join(loc, "_stream_sink", "touched-keys", "cdc"))


@pytest.mark.slow
def test_delta_killed_between_batch_commits_then_restarted_commits_each_merge_once(
    tmp_path: Path,
) -> None:
    """Two MERGE batches staged in one checkpoint commit as two versions; killed between
    them, the restart commits the second, once."""
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, SCHEMA)
    for key, data in ((1, "a"), (2, "b")):  # one file per key: the batches touch disjoint files
        table.append(pa.table({"id": [key], "data": [data]}, schema=SCHEMA))
    job = _job(tmp_path, "pair")
    job.killed_at("between-batch-commits")
    assert DeltaTable.load(loc).snapshot.txn_version(APP) == 0  # the first MERGE landed
    code, out = job.run()
    assert code == 0, out[-2000:]
    table = DeltaTable.load(loc)
    assert [table.snapshot_at(v).txn_version(APP) for v in (3, 4)] == [0, 1]
    assert table.version == 4
    want = [(1, "a1"), (3, "c"), (4, "d")]
    assert _rows(delta_rs_rows(loc)) == want and _rows(duckdb_delta_rows(loc)) == want


def test_every_failpoint_is_exercised_for_delta() -> None:
    names = {fp for fp, _ in SCENARIOS} | {"between-batch-commits"}  # the test above
    assert names == set(FAILPOINTS)
    for scenarios in POSITIONS.values():
        assert {fp for fp, _ in scenarios} == names - {"between-batch-commits"} | {
            "after-position-deletes"
        }


def _changes(rows: list[tuple[str, int, str]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[1] for r in rows], pa.int64()),
            "data": [r[2] for r in rows],
            "_row_kind": [r[0] for r in rows],
        }
    )


def test_between_batch_commits_crash_commits_each_merge_once(tmp_path: Path) -> None:
    """Two MERGE batches staged in one checkpoint commit as two versions; a crash between
    them and a restart commits the second once."""
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, SCHEMA)
    table.append(pa.table({"id": [1, 2], "data": ["a", "b"]}, schema=SCHEMA))

    def committer() -> FilesCommitter:
        c = FilesCommitter(
            DeltaTarget(DeltaTable.load(loc)),
            StateDirectory(str(tmp_path / "state"), kind="rocksdb", sync=False),
            None,
            job_id="j",
            operator_id="s",
        )
        c.restore()
        return c

    c = committer()
    snap = DeltaTable.load(loc).snapshot
    # batch 0 rewrites id 1's file, batch 1 (planned on the same version) only inserts
    c.process(
        0,
        copy_on_write(
            snap,
            table.io,
            _changes([("+U", 1, "a1")]),
            ["id"],
            "upsert",
            row_kind_column="_row_kind",
        ),
    )
    c.process(
        1,
        copy_on_write(
            snap,
            table.io,
            _changes([("+I", 3, "c")]),
            ["id"],
            "upsert",
            row_kind_column="_row_kind",
        ),
    )
    c.snapshot_state(1)
    c.close()  # as if killed after staging: restore commits both, each once
    c = committer()
    c.close()
    c = committer()
    assert c.watermark == 1
    c.close()
    assert _rows(delta_rs_rows(loc)) == [(1, "a1"), (2, "b"), (3, "c")]


def _racer(loc: str, state: str, barrier: threading.Barrier, errors: list[BaseException]) -> None:
    try:
        table = DeltaTable.load(loc)
        c = FilesCommitter(
            DeltaTarget(table),
            StateDirectory(state, kind="memory", sync=False),
            None,
            job_id="q",
            operator_id="sink",
        )
        c.restore()
        for b in range(4):
            data = pa.table({"id": [b], "data": [f"b{b}"]}, schema=SCHEMA)
            adds = write_data_files(loc, data, table.schema, ())
            from stream_sink.delta.batch import DeltaBatch

            c.process(b, DeltaBatch(tuple(adds)))
            c.snapshot_state(b)
            barrier.wait(timeout=60)
            c.notify_checkpoint_complete(b)
        c.close()
    except BaseException as e:  # reported by the test
        errors.append(e)
        barrier.abort()


def test_two_sinks_with_the_same_app_id_racing_commit_each_batch_once(tmp_path: Path) -> None:
    loc = str(tmp_path / "lake")
    DeltaTable.create(loc, SCHEMA)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_racer, args=(loc, str(tmp_path / f"s{i}"), barrier, errors))
        for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == [0, 1, 2, 3]
    table = DeltaTable.load(loc)
    app = app_id("q", "sink")
    marks = [table.snapshot_at(v).txn_version(app) for v in range(1, table.version + 1)]
    assert marks == sorted(set(marks)), f"a batch was committed twice: {marks}"
    files = [
        n
        for d, _, ns in os.walk(loc)
        for n in ns
        if n.endswith(".parquet") and "_delta_log" not in d
    ]
    assert len(files) == 4, "the loser's files were not deleted"
