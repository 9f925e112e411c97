"""Replays in process(), commit modes, branches, staging location, metrics, restore paths."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import (
    Harness,
    branch_rows,
    live_files,
    set_properties,
    snapshot_count,
    staging_manifests,
    table_rows,
    upsert_result,
    watermark,
    write_eq_deletes,
    write_rows,
)

from stream_sink.commit import MANIFESTS_LOCATION, FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.exceptions import InvalidOptionError, StreamSinkError, ValidationError
from stream_sink.table.catalog import Catalog
from stream_sink.table.partitioning import build_partition_spec
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

MakeHarness = Callable[..., Harness]


def exists(result: WriteResult) -> list[bool]:
    return [os.path.exists(p) for p in result.all_paths()]


# --- replays -------------------------------------------------------------------------------


def test_replay_at_or_below_watermark_deletes_its_files_and_changes_nothing(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    first = write_rows(table, [(1, "a")])
    h.step(1, first)
    replay = write_rows(table, [(1, "a")])
    assert h.process(1, replay) is False
    assert exists(replay) == [False] and exists(first) == [True]
    h.checkpoint(1)
    h.notify(1)
    assert table_rows(table) == [(1, "a")] and snapshot_count(table) == 1


def test_replay_of_a_pending_batch_keeps_the_first_result(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    first = write_rows(table, [(1, "first")])
    assert h.process(1, first) is True
    replay = write_rows(table, [(1, "again")])
    assert h.process(1, replay) is False
    assert exists(replay) == [False] and exists(first) == [True]
    h.checkpoint(1)
    h.notify(1)
    assert table_rows(table) == [(1, "first")]


def test_replay_of_a_batch_inside_a_staged_checkpoint(table: Table, harness: MakeHarness) -> None:
    h = harness()
    h.process(1, write_rows(table, [(1, "a")]))
    h.process(2, write_rows(table, [(2, "b")]))
    h.checkpoint(2)
    replay = write_rows(table, [(1, "a")])
    assert h.process(1, replay) is False
    assert exists(replay) == [False]
    assert h.process(2, WriteResult()) is False
    h.notify(2)
    assert table_rows(table) == [(1, "a"), (2, "b")]


def test_a_replay_handing_in_the_stored_files_does_not_delete_them(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    result = write_rows(table, [(1, "a")])
    h.process(1, result)
    assert h.process(1, result) is False
    assert exists(result) == [True]
    h.checkpoint(1)
    assert h.process(1, result) is False
    assert exists(result) == [True]
    h.notify(1)
    assert table_rows(table) == [(1, "a")]


def test_batches_out_of_order_are_refused(table: Table, harness: MakeHarness) -> None:
    h = harness()
    h.process(5, write_rows(table, [(1, "a")]))
    with pytest.raises(ValidationError, match="batch 3 arrives after batch 5"):
        h.process(3, write_rows(table, [(2, "b")]))


def test_restart_commits_pending_batches_that_were_never_checkpointed(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.process(1, write_rows(table, [(1, "a")]))
    h.process(2, write_rows(table, [(2, "b")]))
    h.crash()
    h.open()
    assert table_rows(table) == [(1, "a"), (2, "b")] and h.watermark() == 2
    replay = write_rows(table, [(2, "b")])  # upstream re-runs the unacknowledged batch 2
    assert h.process(2, replay) is False
    assert table_rows(table) == [(1, "a"), (2, "b")]


def test_restart_after_a_half_committed_checkpoint_commits_only_the_rest(
    table: Table, harness: MakeHarness
) -> None:
    """Row deltas of one checkpoint are checked batch by batch against the watermark."""
    h = harness()
    ours = [upsert_result(table, [(7, f"v{b}")]) for b in (1, 2, 3)]
    for b, result in zip((1, 2, 3), ours, strict=True):
        h.process(b, result)
    h.checkpoint(3)
    # another committer of the same job and sink already committed batch 1 and 2
    twin = FilesCommitter(
        IcebergTarget(table.catalog.load_table(table.identifier)),
        StateDirectory(h.state_dir + "-twin", kind="memory", sync=False),
        None,
        job_id=h.job_id,
        operator_id=h.operator_id,
    )
    twin.restore()
    twin.process(1, upsert_result(table, [(7, "v1")]))
    twin.process(2, upsert_result(table, [(7, "v2")]))
    twin.snapshot_state(2)
    twin.notify_checkpoint_complete(2)
    twin.close()
    assert h.watermark() == 2
    h.crash()
    h.open()
    assert table_rows(table) == [(7, "v3")] and h.watermark() == 3
    assert snapshot_count(table) == 3  # twin's two row deltas + batch 3 only
    paths = [f.file_path for f in live_files(table)]
    assert len(paths) == len(set(paths))
    # our files of batches 1 and 2 were never committed: deleted; batch 3's are live
    assert exists(ours[0]) == exists(ours[1]) == [False, False]
    assert set(ours[2].all_paths()) <= set(paths)


# --- modes, branches, options --------------------------------------------------------------


def test_overwrite_mode_replaces_the_partitions_of_each_batch(
    warehouse: Catalog, tmp_path: Path, backend: str
) -> None:
    from harness import SCHEMA

    table = warehouse.create_table("db.parts", schema=SCHEMA, partition_spec=[("identity", "id")])
    h = Harness(tmp_path, table, backend, job_id="j", mode="overwrite")
    h.open()
    h.step(1, write_rows(table, [(1, "a"), (2, "b")]))
    h.process(2, write_rows(table, [(1, "a2")]))
    h.process(3, write_rows(table, [(1, "a3"), (3, "c")]))
    h.checkpoint(3)
    h.notify(3)
    assert table_rows(table) == [(1, "a3"), (2, "b"), (3, "c")]
    assert [s.operation for s in table.refresh().snapshots()] == ["overwrite"] * 3
    with pytest.raises(ValidationError, match="overwrite mode cannot take delete files"):
        h.process(4, WriteResult((), (write_eq_deletes(table, [1]),)))
    h.close()


def test_branch_writes_leave_main_alone(table: Table, harness: MakeHarness) -> None:
    h = harness(branch="audit")
    h.step(1, write_rows(table, [(1, "a")]))
    h.step(2, write_rows(table, [(2, "b")]))
    assert table.refresh().current_snapshot() is None
    assert branch_rows(table, "audit") == [(1, "a"), (2, "b")]
    assert watermark(table, "job-1", "sink", "audit") == 2
    assert watermark(table, "job-1", "sink", "main") == -1
    h.crash()
    h.open()
    assert h.watermark() == 2


def test_staging_manifests_location_property(
    table: Table, harness: MakeHarness, tmp_path: Path
) -> None:
    custom = str(tmp_path / "staging")
    set_properties(table, **{MANIFESTS_LOCATION: custom + "/"})
    h = harness()
    h.process(1, write_rows(table, [(1, "a")]))
    h.checkpoint(1)
    assert len(staging_manifests(table, custom)) == 1 and h.staging_manifests() == []
    h.notify(1)
    assert staging_manifests(table, custom) == []
    assert table_rows(table) == [(1, "a")]


def test_metrics(table: Table, harness: MakeHarness) -> None:
    h = harness()
    empty = h.c.metrics.snapshot()
    assert empty.commits == 0 and empty.seconds_since_last_successful_commit is None
    data = write_rows(table, [(1, "a"), (2, "b")])
    h.process(1, data)
    h.checkpoint(1)
    h.notify(1)
    h.process(2, WriteResult((), (write_eq_deletes(table, [1]),)))
    h.checkpoint(2)
    h.notify(2)
    m = h.c.metrics.snapshot()
    assert m.commits == 2
    assert m.committed_data_files == 1 and m.committed_delete_files == 1
    assert m.committed_records == 2
    assert m.committed_bytes == sum(f.file_size_in_bytes for f in live_files(table))
    assert m.last_checkpoint_duration_ms is not None and m.last_checkpoint_duration_ms >= 0
    assert m.last_commit_duration_ms is not None and m.last_commit_duration_ms > 0
    assert m.seconds_since_last_successful_commit is not None
    assert 0 <= m.seconds_since_last_successful_commit < 60


def test_options_are_checked(table: Table, tmp_path: Path) -> None:
    state = StateDirectory(str(tmp_path / "s"), kind="memory")
    target = IcebergTarget(table)
    with pytest.raises(InvalidOptionError, match="commit mode"):
        FilesCommitter(target, state, None, job_id="j", operator_id="s", mode="upsert")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="must be positive"):
        FilesCommitter(
            target, state, None, job_id="j", operator_id="s", max_continuous_empty_commits=0
        )
    with pytest.raises(InvalidOptionError, match="sink id"):
        FilesCommitter(target, state, None, job_id="j", operator_id="a/b")
    with pytest.raises(InvalidOptionError, match="needs a CommitTarget"):
        FilesCommitter(table, state, None, job_id="j", operator_id="s")  # type: ignore[arg-type]
    c = FilesCommitter(target, state, None, job_id="j", operator_id="s")
    with pytest.raises(StreamSinkError, match="restore"):
        c.process(0, WriteResult())


def test_delete_files_in_a_v1_table_are_refused_at_staging(
    warehouse: Catalog, tmp_path: Path, backend: str
) -> None:
    from harness import SCHEMA

    table = warehouse.create_table("db.v1", schema=SCHEMA, format_version=1)
    h = Harness(tmp_path, table, backend, job_id="j")
    h.open()
    h.process(1, WriteResult((), (write_eq_deletes(table, [1]),)))
    with pytest.raises(ValidationError, match="delete files need a v2 table"):
        h.checkpoint(1)
    h.close()


def test_partitioned_table_round_trip(warehouse: Catalog, tmp_path: Path, backend: str) -> None:
    from harness import SCHEMA

    table = warehouse.create_table(
        "db.bucketed", schema=SCHEMA, partition_spec=[("bucket", "id", 4)]
    )
    assert table.spec() == build_partition_spec(table.schema(), [("bucket", "id", 4)])
    h = Harness(tmp_path, table, backend, job_id="j")
    h.open()
    rows = [(i, f"r{i}") for i in range(20)]
    h.step(1, write_rows(table, rows))
    assert table_rows(table) == rows
    h.close()


def test_restart_removes_the_temporary_files_a_killed_atomic_write_left_in_the_sink_directory(
    tmp_path: Path, table: Table, backend: str
) -> None:
    """A process killed inside an atomic write (between writing the temporary file and
    renaming it over ``_table.json`` or ``maintenance.json``) leaves ``<name>.<hex>.tmp``
    in the sink's directory: the restart commits what was pending and removes them, and
    keeps the files they were to replace."""
    h = Harness(tmp_path, table, backend, job_id="job-1", operator_id="s")
    h.open()
    h.step(0, write_rows(table, [(0, "a")]))
    h.process(1, write_rows(table, [(1, "b")]))
    h.checkpoint(1)
    h.crash()
    sink_dir = tmp_path / "checkpoints" / "s"
    (sink_dir / "maintenance.json").write_text("{}")
    torn = [sink_dir / f"{name}.{'0a1b' * 8}.tmp" for name in ("_table.json", "maintenance.json")]
    for f in torn:
        f.write_text('{"half')
    h.open(acknowledged=[0, 1])
    h.close()
    assert table_rows(table) == [(0, "a"), (1, "b")]
    assert [f for f in torn if f.exists()] == []
    assert (sink_dir / "_table.json").exists() and (sink_dir / "maintenance.json").exists()
