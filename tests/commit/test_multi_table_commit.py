"""One checkpoint committed to several tables at once (``commit.iceberg.multi_table``),
on the SQL catalog (SQLite): every table's snapshot lands in one transaction, each
guarded by its own watermark; a lost race, an unknown outcome that landed or did not,
and a torn one; catalogs that cannot commit atomically commit table by table."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from harness import SCHEMA, write_rows

from stream_sink.catalogs import load_catalog
from stream_sink.commit.iceberg.multi_table import (
    TableCheckpoint,
    atomic_commit_problem,
    commit_checkpoint,
)
from stream_sink.commit.iceberg.table_commit import SinkIdentity, commit_group
from stream_sink.commit.iceberg.watermark import committed_watermark
from stream_sink.commit.shapes import CommitGroup, Shape, StagedBatch
from stream_sink.exceptions import CommitStateUnknownError, PartialCommitError
from stream_sink.metrics.committer import CommitterMetrics
from stream_sink.table.catalog import Catalog
from stream_sink.table.catalog.base import CommittedTable, TableCommit
from stream_sink.table.table import Table

NAMES = ("db.orders", "db.lines", "db.stock")
JOB = "job-1"
REPO = Path(__file__).resolve().parents[2]


def open_sql(root: Path, uri: str | None = None, name: str = "shop") -> Catalog:
    uri = uri or f"sqlite:///{root}/catalog.db"
    return load_catalog(name, type="sql", uri=uri, warehouse=str(root / "wh"))


def make_tables(cat: Catalog) -> list[Table]:
    cat.create_namespace("db")
    props = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "2"}
    return [cat.create_table(n, SCHEMA, identifier_fields=["id"], properties=props) for n in NAMES]


def checkpoint(tables: Sequence[Table], batch: int, rows: int = 2) -> list[TableCheckpoint]:
    out = []
    for i, t in enumerate(tables):
        files = write_rows(t, [(batch * 100 + i * 10 + r, t.name) for r in range(rows)])
        group = CommitGroup(Shape.APPEND, (StagedBatch(batch, batch, b"", files),), batch)
        who = SinkIdentity(JOB, f"sink={t.name}", "main", {})
        out.append(TableCheckpoint(t, group, who, CommitterMetrics(lambda: 0.0)))
    return out


def marks(cat: Catalog) -> list[int]:
    return [
        committed_watermark(cat.load_table(n).metadata, JOB, f"sink={n}", "main") for n in NAMES
    ]


def snapshots(cat: Catalog) -> list[int]:
    return [len(cat.load_table(n).metadata.snapshots) for n in NAMES]


def wrap_commit(cat: Catalog, around: Callable[..., list[CommittedTable]]) -> None:
    real = cat.commit_tables

    def commit_tables(commits: Sequence[TableCommit], **kw: Any) -> list[CommittedTable]:
        return around(real, commits, **kw)

    cat.commit_tables = commit_tables  # type: ignore[method-assign]


def count_commits(cat: Catalog) -> list[int]:
    """The number of tables each ``commit_tables`` call of ``cat`` carries, as they come."""
    calls: list[int] = []
    wrap_commit(cat, lambda real, commits, **kw: calls.append(len(commits)) or real(commits, **kw))
    return calls


def test_one_checkpoint_lands_on_every_table_in_one_transaction(tmp_path: Path) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    assert atomic_commit_problem(cat) is None
    calls = count_commits(cat)
    assert commit_checkpoint(checkpoint(tables, 3)) == dict.fromkeys(NAMES)
    assert calls == [3]  # one catalog commit for the three tables
    assert marks(cat) == [3, 3, 3]
    for n in NAMES:
        head = cat.load_table(n).current_snapshot()
        assert head is not None and head.summary["stream-sink.max-committed-checkpoint-id"] == "3"
        assert head.summary["total-records"] == "2"


def test_a_replayed_checkpoint_is_refused_by_every_watermark(tmp_path: Path) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    commit_checkpoint(checkpoint(tables, 3))
    before = snapshots(cat)
    assert commit_checkpoint(checkpoint(tables, 3)) == dict.fromkeys(NAMES, 3)
    assert snapshots(cat) == before


def test_a_table_already_committed_is_left_out_and_the_rest_commit(tmp_path: Path) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    parts = checkpoint(tables, 4)
    first = parts[0]
    assert commit_group(first.table, first.group, first.who, first.metrics) is None
    assert commit_checkpoint(parts) == {NAMES[0]: 4, NAMES[1]: None, NAMES[2]: None}
    assert marks(cat) == [4, 4, 4]
    assert snapshots(cat) == [1, 1, 1]


def test_a_lost_race_is_retried_on_the_moved_table(tmp_path: Path) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    other = open_sql(tmp_path)
    raced: list[str] = []

    def race_once(real: Any, commits: Sequence[TableCommit], **kw: Any) -> Any:
        if not raced:  # another writer appends to the second table first
            t = other.load_table(NAMES[1])
            t.new_fast_append().append_files(write_rows(t, [(999, "x")]).data_files).commit()
            raced.append("x")
        return real(commits, **kw)

    wrap_commit(cat, race_once)
    assert commit_checkpoint(checkpoint(tables, 5)) == dict.fromkeys(NAMES)
    assert marks(cat) == [5, 5, 5]
    assert snapshots(cat) == [1, 2, 1]
    assert cat.load_table(NAMES[1]).current_snapshot().summary["total-records"] == "3"  # type: ignore[union-attr]


def test_an_unknown_outcome_that_landed_is_found_by_the_watermarks(tmp_path: Path) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    answers: list[str] = []

    def land_then_lose_the_answer(real: Any, commits: Sequence[TableCommit], **kw: Any) -> Any:
        done = real(commits, **kw)
        if not answers:
            answers.append("lost")
            raise CommitStateUnknownError("the answer was lost")
        return done

    wrap_commit(cat, land_then_lose_the_answer)
    assert commit_checkpoint(checkpoint(tables, 6)) == dict.fromkeys(NAMES, 6)
    assert marks(cat) == [6, 6, 6]
    assert snapshots(cat) == [1, 1, 1]  # never twice


def test_the_lost_answer_fault_point_is_settled_by_reading_every_table_back(
    tmp_path: Path,
) -> None:
    from stream_sink.commit.failpoints import on_fault, reset_failpoints

    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    heard: list[str] = []
    on_fault(heard.append)
    reset_failpoints("lost-tables-answer")
    try:
        assert commit_checkpoint(checkpoint(tables, 6)) == dict.fromkeys(NAMES, 6)
        assert heard == ["lost-tables-answer"]
        assert commit_checkpoint(checkpoint(tables, 7)) == dict.fromkeys(NAMES)  # once only
    finally:
        reset_failpoints()
    assert marks(cat) == [7, 7, 7]
    assert snapshots(cat) == [2, 2, 2]  # each checkpoint once


def test_an_unknown_outcome_that_did_not_land_is_committed_again(tmp_path: Path) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    answers: list[str] = []

    def fail_before_sending(real: Any, commits: Sequence[TableCommit], **kw: Any) -> Any:
        if not answers:
            answers.append("lost")
            raise CommitStateUnknownError("the server did not answer")
        return real(commits, **kw)

    wrap_commit(cat, fail_before_sending)
    assert commit_checkpoint(checkpoint(tables, 7)) == dict.fromkeys(NAMES)
    assert marks(cat) == [7, 7, 7]
    assert snapshots(cat) == [1, 1, 1]


def test_a_torn_transaction_is_reported_never_papered_over(tmp_path: Path) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)

    def land_on_the_first_only(real: Any, commits: Sequence[TableCommit], **kw: Any) -> Any:
        real(commits[:1], **kw)
        raise CommitStateUnknownError("the server went away")

    wrap_commit(cat, land_on_the_first_only)
    with pytest.raises(PartialCommitError, match=r"shows on db\.orders but not on db\.lines"):
        commit_checkpoint(checkpoint(tables, 8))
    assert marks(cat) == [8, -1, -1]


def test_a_catalog_without_transactions_commits_table_by_table(tmp_path: Path) -> None:
    cat = load_catalog("h", type="hadoop", warehouse=str(tmp_path / "wh"))
    tables = make_tables(cat)
    assert atomic_commit_problem(cat) is not None
    assert commit_checkpoint(checkpoint(tables, 2)) == dict.fromkeys(NAMES)
    assert marks(cat) == [2, 2, 2]


CHILD = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_multi_table_commit import checkpoint, open_sql, NAMES
from stream_sink.commit.iceberg.multi_table import commit_checkpoint
cat = open_sql(Path({root!r}), {uri!r}, {name!r})
commit_checkpoint(checkpoint([cat.load_table(n) for n in NAMES], 9))
print("committed", flush=True)
"""


def killed_child(child: str, point: str, **fields: Any) -> str:
    """Run ``child`` (formatted with ``fields`` and the tests' directory) with failpoint
    ``point`` armed; it must die by SIGKILL. Returns what it printed."""
    code = textwrap.dedent(child).format(tests=str(REPO / "tests" / "commit"), **fields)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={"STREAM_SINK_FAILPOINT": point, "PYTHONPATH": f"{REPO}:{REPO / 'tests'}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize(
    "database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@pytest.mark.parametrize(
    ("point", "landed"),
    [
        ("after-tables-metadata-write", False),
        ("inside-tables-swap@2", False),  # the second table's pointer moved, not committed
        ("after-tables-commit", True),
    ],
)
def test_a_kill_in_the_multi_table_commit_leaves_all_or_nothing(
    tmp_path: Path, point: str, landed: bool, database: str, request: pytest.FixtureRequest
) -> None:
    uri = request.getfixturevalue("postgres_url") if database == "postgres" else None
    name = f"shop_{uuid.uuid4().hex[:8]}"
    cat = open_sql(tmp_path, uri, name)
    make_tables(cat)
    killed_child(CHILD, point, root=str(tmp_path), uri=uri, name=name)
    after = open_sql(tmp_path, uri, name)
    assert marks(after) == ([9, 9, 9] if landed else [-1, -1, -1])
    # the restart commits what is missing, exactly once
    tables = [after.load_table(n) for n in NAMES]
    expected = dict.fromkeys(NAMES, 9) if landed else dict.fromkeys(NAMES)
    assert commit_checkpoint(checkpoint(tables, 9)) == expected
    assert marks(after) == [9, 9, 9]
    assert snapshots(after) == [1, 1, 1]


# --- through the commit driver, from each table's FilesCommitter ----------------------------


def files_committer(root: Path, table: Table, operator_id: str) -> Any:
    from stream_sink.checkpoints import CheckpointStorage
    from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory

    return FilesCommitter(
        IcebergTarget(table),
        StateDirectory(str(root / "state" / operator_id)),
        CheckpointStorage(str(root / "checkpoints"), operator_id),
        job_id=JOB,
        operator_id=operator_id,
    )


def open_driver(root: Path, cat: Catalog) -> Any:
    from stream_sink.commit.driver import CommitDriver
    from stream_sink.commit.iceberg.multi_table import commit_together

    driver = CommitDriver(commit_together=commit_together)
    for n in NAMES:
        driver.open(n, files_committer(root, cat.load_table(n), f"sink={n}"), [])
    return driver


def test_the_driver_commits_each_checkpoint_of_several_tables_in_one_transaction(
    tmp_path: Path,
) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    calls = count_commits(cat)
    driver = open_driver(tmp_path, cat)
    try:
        driver.record(0, {t.name: write_rows(t, [(i, "a")]) for i, t in enumerate(tables)})
        driver.record(1, {t.name: write_rows(t, [(10 + i, "b")]) for i, t in enumerate(tables[:2])})
        assert driver.watermarks() == {NAMES[0]: 1, NAMES[1]: 1, NAMES[2]: 0}
    finally:
        driver.close()
    assert calls == [3, 2]  # one transaction per checkpoint, of the tables it wrote
    assert marks(cat) == [1, 1, 0]
    assert snapshots(cat) == [2, 2, 1]


def test_a_replay_after_the_transaction_landed_is_dropped_by_every_table(
    tmp_path: Path,
) -> None:
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    driver = open_driver(tmp_path, cat)
    try:
        driver.record(0, {t.name: write_rows(t, [(i, "a")]) for i, t in enumerate(tables)})
        assert not driver.record(
            0, {t.name: write_rows(t, [(i, "a")]) for i, t in enumerate(tables)}
        )
    finally:
        driver.close()
    assert marks(cat) == [0, 0, 0] and snapshots(cat) == [1, 1, 1]


# --- a restart finishes what a crash left, on every table at once ----------------------------


def left_by_a_crash(root: Path, cat: Catalog, batch: int, staged: Sequence[str]) -> None:
    """Batch ``batch`` recorded in every table, staged (phase 1 done) in ``staged``, then
    the process gone before any table committed."""
    for i, n in enumerate(NAMES):
        table = cat.load_table(n)
        committer = files_committer(root, table, f"sink={n}")
        committer.restore(acknowledged_batch_ids=[], defer_commit=True)
        try:
            committer.process(batch, write_rows(table, [(batch * 100 + i, "x")]))
            if n in staged:
                committer.snapshot_state(batch)
                committer.complete_checkpoint(batch)
        finally:
            committer.close()


def reopen(root: Path, cat: Catalog, acknowledged: Sequence[int]) -> Any:
    from stream_sink.commit.driver import CommitDriver
    from stream_sink.commit.iceberg.multi_table import commit_together

    driver = CommitDriver(commit_together=commit_together)
    for n in NAMES:
        committer = files_committer(root, cat.load_table(n), f"sink={n}")
        driver.open(n, committer, acknowledged, defer_commit=True)
    return driver


@pytest.mark.parametrize(
    ("staged", "acknowledged"),
    [
        (NAMES[:1], []),  # killed in phase 1: one table staged, Spark acknowledged nothing
        (NAMES, []),  # killed between phase 1 and the commit
        ((), [5]),  # recorded everywhere and acknowledged, the checkpoint not yet due
    ],
)
def test_a_restart_commits_every_tables_leftovers_in_one_transaction(
    tmp_path: Path, staged: Sequence[str], acknowledged: Sequence[int]
) -> None:
    cat = open_sql(tmp_path)
    make_tables(cat)
    left_by_a_crash(tmp_path, cat, 5, staged)
    calls = count_commits(cat)
    driver = reopen(tmp_path, cat, acknowledged)
    try:
        assert marks(cat) == [-1, -1, -1]  # opening alone commits nothing
        committed = driver.commit_restored(acknowledged)
        assert sorted(committed) == sorted(NAMES)
        assert driver.watermarks() == dict.fromkeys(NAMES, 5)
    finally:
        driver.close()
    assert calls == [3]
    assert marks(cat) == [5, 5, 5] and snapshots(cat) == [1, 1, 1]


def test_a_batch_some_tables_recorded_commits_everywhere_with_its_rerun(tmp_path: Path) -> None:
    """Killed after the first table recorded batch 5: nothing commits at the restart; Spark
    runs the batch again, the first table drops it as a replay, and the checkpoint commits
    the batch to all three tables in one transaction."""
    cat = open_sql(tmp_path)
    tables = make_tables(cat)
    first = cat.load_table(NAMES[0])
    committer = files_committer(tmp_path, first, f"sink={NAMES[0]}")
    committer.restore(acknowledged_batch_ids=[])
    committer.process(5, write_rows(first, [(500, "x")]))
    committer.close()
    calls = count_commits(cat)
    driver = reopen(tmp_path, cat, [])
    try:
        assert driver.commit_restored([]) == {}
        assert marks(cat) == [-1, -1, -1]
        rerun = {t.name: write_rows(t, [(500 + i, "x")]) for i, t in enumerate(tables)}
        assert driver.record(5, rerun)
    finally:
        driver.close()
    assert calls == [3]
    assert marks(cat) == [5, 5, 5] and snapshots(cat) == [1, 1, 1]
    head = cat.load_table(NAMES[0]).current_snapshot()
    assert head is not None and head.summary["total-records"] == "1"  # the first run's row


def test_a_restart_without_deferral_commits_each_table_on_its_own(tmp_path: Path) -> None:
    cat = open_sql(tmp_path)
    make_tables(cat)
    left_by_a_crash(tmp_path, cat, 5, NAMES)
    calls = count_commits(cat)
    driver = open_driver(tmp_path, cat)
    assert marks(cat) == [5, 5, 5]  # each table committed when it was opened
    driver.close()
    assert calls == []  # by its own commit, none in a transaction of several


# --- deletes="positions": resolved in the transaction's attempts -----------------------------


def positions_driver(root: Path, cat: Catalog) -> Any:
    from stream_sink.checkpoints import CheckpointStorage
    from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
    from stream_sink.commit.driver import CommitDriver
    from stream_sink.commit.iceberg.multi_table import commit_together

    driver = CommitDriver(commit_together=commit_together)
    for n in NAMES:
        op = f"sink={n}"
        committer = FilesCommitter(
            IcebergTarget(cat.load_table(n), deletes="positions"),
            StateDirectory(str(root / "state" / op)),
            CheckpointStorage(str(root / "checkpoints"), op),
            job_id=JOB,
            operator_id=op,
        )
        driver.open(n, committer, [], defer_commit=True)
    return driver


def equality_delete_files(table: Table) -> int:
    from stream_sink.table.manifest import DataFileContent, read_manifest, read_manifest_list

    meta = table.refresh().metadata
    found = 0
    for snap in meta.snapshots:
        for m in read_manifest_list(table.io, snap.manifest_list):
            ptype = meta.spec_by_id(m.partition_spec_id).partition_type(meta.schema)
            for e in read_manifest(table.io, m, ptype):
                found += e.data_file.content == DataFileContent.EQUALITY_DELETES
    return found


@pytest.mark.parametrize("version", [2, 3])
def test_positions_commit_every_table_in_one_transaction_every_reader_reads(
    tmp_path: Path, version: int
) -> None:
    from changelog import BATCHES, expected_rows, write_changes
    from harness import table_rows
    from readers import pyiceberg_rows

    cat = open_sql(tmp_path)
    make_position_tables(cat, version)
    calls = count_commits(cat)
    driver = positions_driver(tmp_path, cat)
    try:
        for i, batch in enumerate(BATCHES):
            tables = {n: cat.load_table(n) for n in NAMES}
            driver.record(i, {n: write_changes(t, batch) for n, t in tables.items()})
            want = expected_rows(BATCHES[: i + 1])
            for n in NAMES:
                table = cat.load_table(n)
                assert table_rows(table) == want, (n, i)
                got = pyiceberg_rows(table.metadata_location)
                assert sorted((r["id"], r["data"]) for r in got) == want, (n, i)
    finally:
        driver.close()
    assert calls == [3] * len(BATCHES)  # every checkpoint one transaction of three tables
    assert marks(cat) == [len(BATCHES) - 1] * 3
    assert [equality_delete_files(cat.load_table(n)) for n in NAMES] == [0, 0, 0]


def test_positions_resolve_again_after_a_lost_race(tmp_path: Path) -> None:
    """Another writer commits to one table after the transaction's deletes were resolved:
    the swap loses the race, the resolution's files are deleted, and the next attempt
    resolves every table against its new head; the other writer's rows stay."""
    from changelog import BATCHES, expected_rows, write_changes
    from harness import table_rows

    cat = open_sql(tmp_path)
    make_tables(cat)
    other = open_sql(tmp_path)
    raced: list[str] = []

    def race_once(real: Any, commits: Sequence[TableCommit], **kw: Any) -> Any:
        if not raced:
            raced.append("x")
            foreign = other.load_table(NAMES[1])
            foreign.new_append().append_files(
                write_rows(foreign, [(900, "foreign")]).data_files
            ).commit()
        return real(commits, **kw)

    driver = positions_driver(tmp_path, cat)
    try:
        for i, batch in enumerate(BATCHES[:3]):
            if i == 2:
                wrap_commit(cat, race_once)
            tables = {n: cat.load_table(n) for n in NAMES}
            driver.record(i, {n: write_changes(t, batch) for n, t in tables.items()})
    finally:
        driver.close()
    assert raced
    want = expected_rows(BATCHES[:3])
    assert table_rows(cat.load_table(NAMES[0])) == want
    assert table_rows(cat.load_table(NAMES[1])) == sorted([*want, (900, "foreign")])
    assert marks(cat) == [2, 2, 2]


POSITIONS_CHILD = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from changelog import BATCHES, write_changes
from test_multi_table_commit import NAMES, open_sql, positions_driver
root = Path({root!r})
cat = open_sql(root)
driver = positions_driver(root, cat)
for i, batch in enumerate(BATCHES):
    driver.record(i, {{n: write_changes(cat.load_table(n), batch) for n in NAMES}})
    print("recorded", i, flush=True)
"""


def make_position_tables(cat: Catalog, version: int) -> None:
    cat.create_namespace("db")
    props = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "2"}
    for n in NAMES:
        cat.create_table(
            n, SCHEMA, identifier_fields=["id"], properties=props, format_version=version
        )


@pytest.mark.parametrize(
    "point",
    [
        "after-position-deletes@2",  # the second table's deletes resolved, nothing swapped
        "inside-tables-swap@5",  # batch 1: two tables' pointers moved, rolled back
        "after-tables-commit@2",  # batch 1 committed, not yet recorded by the states
    ],
)
def test_a_kill_in_a_positions_transaction_restarts_exact_on_every_table(
    tmp_path: Path, point: str
) -> None:
    """Killed inside a positions checkpoint's transaction: every table is at the same
    batch after the kill and after the restart's own commit; the re-run batches then
    leave every table exact for ours and pyiceberg, with no equality delete anywhere."""
    from changelog import BATCHES, expected_rows, write_changes
    from harness import table_rows
    from readers import pyiceberg_rows

    cat = open_sql(tmp_path)
    make_position_tables(cat, 3)
    out = killed_child(POSITIONS_CHILD, point, root=str(tmp_path))
    acked = [int(line.split()[1]) for line in out.splitlines()]
    after = open_sql(tmp_path)
    assert len(set(marks(after))) == 1, marks(after)  # never some tables only
    driver = positions_driver(tmp_path, after)
    try:
        driver.commit_restored(acked)
        assert len(set(marks(after))) == 1, marks(after)
        for i in range(max(acked, default=-1) + 1, len(BATCHES)):  # Spark's re-run, then on
            tables = {n: after.load_table(n) for n in NAMES}
            driver.record(i, {n: write_changes(t, BATCHES[i]) for n, t in tables.items()})
    finally:
        driver.close()
    want = expected_rows(BATCHES)
    for n in NAMES:
        table = after.load_table(n)
        assert table_rows(table) == want, n
        got = pyiceberg_rows(table.metadata_location)
        assert sorted((r["id"], r["data"]) for r in got) == want, n
        assert equality_delete_files(table) == 0, n
    assert marks(after) == [len(BATCHES) - 1] * 3
