"""FilesCommitter scenarios, named after Iceberg's TestIcebergFilesCommitter (Flink sink).

Every test runs on the in-memory (logged) and the RocksDB state backend, against a real
table in a Hadoop-catalog warehouse; rows are read back with DuckDB's iceberg extension.

Tests stream_sink.commit.committer: the FilesCommitter's two phases.
Tests stream_sink.commit.target: through the target interface.
Tests stream_sink.commit.iceberg.table_commit: each commit group one snapshot, guarded by
the watermark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from harness import (
    Harness,
    change_table,
    live_files,
    set_properties,
    snapshot_count,
    table_rows,
    upsert_result,
    watermark,
    write_eq_deletes,
    write_rows,
)

from stream_sink.commit import (
    JOB_ID,
    MAX_COMMITTED_CHECKPOINT_ID,
    MAX_CONTINUOUS_EMPTY_COMMITS,
    OPERATOR_ID,
    deserialize_staged_manifests,
    read_staged_files,
)
from stream_sink.commit.committer_state import decode_staged, staged_key
from stream_sink.commit.driver import end_input
from stream_sink.table.partitioning import build_partition_spec
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

MakeHarness = Callable[..., Harness]
PROPS = {"flink.test": "TestIcebergFilesCommitter"}


def staged_spec_id(h: Harness, checkpoint_id: int) -> int:
    raw = h.c.state.get(staged_key(checkpoint_id))
    assert raw is not None
    (_, payload), *_ = decode_staged(raw, where="test")
    return deserialize_staged_manifests(payload, where="test").data_manifests[0].partition_spec_id


def test_commit_txn_without_data_files(table: Table, harness: MakeHarness) -> None:
    """testCommitTxnWithoutDataFiles: empty checkpoints still advance the watermark."""
    h = harness(max_continuous_empty_commits=1)
    assert table_rows(table) == [] and snapshot_count(table) == 0
    assert h.watermark() == -1
    for i in range(1, 4):
        h.checkpoint(i)
        assert h.staging_manifests() == []
        h.notify(i)
        assert h.staging_manifests() == []
        assert snapshot_count(table) == i
        assert h.watermark() == i


def test_max_continuous_empty_commits(table: Table, harness: MakeHarness) -> None:
    """testMaxContinuousEmptyCommits: every 3rd empty checkpoint commits (table property)."""
    set_properties(table, **{MAX_CONTINUOUS_EMPTY_COMMITS: "3"})
    h = harness()
    for i in range(1, 10):
        h.checkpoint(i)
        h.notify(i)
        assert snapshot_count(table) == i // 3
    assert h.watermark() == 9


def test_commit_txn(table: Table, harness: MakeHarness) -> None:
    """testCommitTxn: three checkpoints, each snapshot, notify."""
    h = harness(snapshot_properties=PROPS)
    rows = []
    for i in range(1, 4):
        rows.append((i, f"hello{i}"))
        h.process(i, write_rows(table, [rows[-1]]))
        h.checkpoint(i)
        assert len(h.staging_manifests()) == 1
        h.notify(i)
        assert h.staging_manifests() == []
        assert table_rows(table) == rows
        assert snapshot_count(table) == i
        assert h.watermark() == i
        assert table.current_snapshot().summary["flink.test"] == PROPS["flink.test"]  # type: ignore[union-attr]


def test_ordered_events_between_checkpoints(table: Table, harness: MakeHarness) -> None:
    """testOrderedEventsBetweenCheckpoints: snapshot 1, snapshot 2, notify 1, notify 2."""
    h = harness()
    h.process(1, write_rows(table, [(1, "hello")]))
    h.checkpoint(1)
    assert len(h.staging_manifests()) == 1
    h.process(2, write_rows(table, [(2, "world")]))
    assert h.watermark() == -1
    h.checkpoint(2)
    assert len(h.staging_manifests()) == 2
    h.notify(1)
    assert table_rows(table) == [(1, "hello")]
    assert h.watermark() == 1
    assert len(h.staging_manifests()) == 1
    h.notify(2)
    assert table_rows(table) == [(1, "hello"), (2, "world")]
    assert h.watermark() == 2
    assert h.staging_manifests() == []


def test_disordered_events_between_checkpoints(table: Table, harness: MakeHarness) -> None:
    """testDisorderedEventsBetweenCheckpoints: notify 2 commits both, a late notify 1
    does nothing."""
    h = harness()
    h.process(1, write_rows(table, [(1, "hello")]))
    h.checkpoint(1)
    h.process(2, write_rows(table, [(2, "world")]))
    h.checkpoint(2)
    assert len(h.staging_manifests()) == 2
    h.notify(2)
    assert table_rows(table) == [(1, "hello"), (2, "world")]
    assert h.watermark() == 2 and snapshot_count(table) == 1
    assert h.staging_manifests() == []
    h.notify(1)
    assert table_rows(table) == [(1, "hello"), (2, "world")]
    assert h.watermark() == 2 and snapshot_count(table) == 1


def test_recovery_from_valid_snapshot(table: Table, harness: MakeHarness) -> None:
    """testRecoveryFromValidSnapshot: restart after a committed checkpoint."""
    h = harness()
    h.process(1, write_rows(table, [(1, "hello")]))
    h.checkpoint(1)
    assert len(h.staging_manifests()) == 1
    h.notify(1)
    assert h.staging_manifests() == []
    h.crash()
    h.open()
    assert table_rows(table) == [(1, "hello")]
    assert snapshot_count(table) == 1 and h.watermark() == 1
    h.process(2, write_rows(table, [(2, "world")]))
    h.checkpoint(2)
    assert len(h.staging_manifests()) == 1
    h.notify(2)
    assert h.staging_manifests() == []
    assert table_rows(table) == [(1, "hello"), (2, "world")]
    assert snapshot_count(table) == 2 and h.watermark() == 2


def test_recovery_from_snapshot_without_completed_notification(
    table: Table, harness: MakeHarness
) -> None:
    """testRecoveryFromSnapshotWithoutCompletedNotification: a restart commits the staged
    checkpoint; a later restart under a NEW job id commits the old job's staged batch
    under the old id and starts the new job at -1."""
    h = harness(max_continuous_empty_commits=1)
    h.process(1, write_rows(table, [(1, "hello")]))
    h.checkpoint(1)
    assert table_rows(table) == [] and h.watermark() == -1
    assert len(h.staging_manifests()) == 1
    h.crash()

    h.open()
    assert h.staging_manifests() == []
    assert table_rows(table) == [(1, "hello")] and h.watermark() == 1
    h.checkpoint(2)
    assert h.staging_manifests() == []
    h.notify(2)
    assert snapshot_count(table) == 2 and h.watermark() == 2
    h.process(3, write_rows(table, [(2, "world")]))
    h.checkpoint(3)
    assert len(h.staging_manifests()) == 1
    h.crash()

    h.open(job_id="job-2")
    assert h.staging_manifests() == []
    assert watermark(table, "job-2", "sink") == -1
    assert watermark(table, "job-1", "sink") == 3
    assert table_rows(table) == [(1, "hello"), (2, "world")]
    assert snapshot_count(table) == 3
    h.process(0, write_rows(table, [(3, "foo")]))  # a new query starts its batch ids over
    h.checkpoint(0)
    assert len(h.staging_manifests()) == 1
    h.notify(0)
    assert h.staging_manifests() == []
    assert table_rows(table) == [(1, "hello"), (2, "world"), (3, "foo")]
    assert snapshot_count(table) == 4
    assert watermark(table, "job-2", "sink") == 0


def test_recovery_without_notification_with_new_job_id(table: Table, harness: MakeHarness) -> None:
    """The new-job-id path on its own: staged and pending batches of the old job are
    committed under the old job id, the new job is not blinded by them (Iceberg #18098)."""
    h = harness()
    h.process(5, write_rows(table, [(1, "a")]))
    h.checkpoint(5)
    h.process(6, write_rows(table, [(2, "b")]))  # pending only: no checkpoint yet
    h.crash()
    h.open(job_id="job-2")
    assert table_rows(table) == [(1, "a"), (2, "b")]
    assert watermark(table, "job-1", "sink") == 6
    assert h.watermark() == -1
    assert h.c.pending_batch_ids == () and h.c.staged_checkpoints == {}
    h.step(0, write_rows(table, [(3, "c")]))
    assert table_rows(table) == [(1, "a"), (2, "b"), (3, "c")]
    assert h.watermark() == 0


def test_start_another_job_to_write_same_table(table: Table, harness: MakeHarness) -> None:
    """testStartAnotherJobToWriteSameTable: a new job starts at -1 though the old job's
    watermark is 3, and its batch 1 is committed."""
    h = harness(job_id="old")
    rows: list[tuple[int, str]] = []
    for i in range(1, 4):
        rows.append((i, f"hello{i}"))
        h.step(i, write_rows(table, [rows[-1]]))
        assert snapshot_count(table) == i and h.watermark() == i
    h.close()
    h.open(job_id="new")
    assert snapshot_count(table) == 3
    assert watermark(table, "old", "sink") == 3 and watermark(table, "new", "sink") == -1
    h.step(1, write_rows(table, [(4, "world")]))
    assert table_rows(table) == [*rows, (4, "world")]
    assert snapshot_count(table) == 4 and watermark(table, "new", "sink") == 1


def test_multiple_jobs_write_same_table(table: Table, harness: MakeHarness) -> None:
    """testMultipleJobsWriteSameTable: three (job, operator) pairs take turns."""
    jobs = [("job-a", "op-a"), ("job-b", "op-b"), ("job-c", "op-c")]
    expected = []
    for i in range(20):
        job, op = jobs[i % 3]
        checkpoint = i // 3
        h = harness(job_id=job, operator_id=op)
        assert snapshot_count(table) == i
        assert h.watermark() == (checkpoint if checkpoint else -1)
        expected.append((i, f"word-{i}"))
        h.process(checkpoint + 1, write_rows(table, [expected[-1]]))
        h.checkpoint(checkpoint + 1)
        assert len(h.staging_manifests()) == 1
        h.notify(checkpoint + 1)
        assert h.staging_manifests() == []
        assert snapshot_count(table) == i + 1
        assert h.watermark() == checkpoint + 1
        h.close()
    assert table_rows(table) == sorted(expected)


def test_multiple_sinks_recovery_from_valid_snapshot(table: Table, harness: MakeHarness) -> None:
    """testMultipleSinksRecoveryFromValidSnapshot: two sinks of one job, only one
    notified before the crash; the restart commits the other."""
    h1, h2 = harness(operator_id="op1"), harness(operator_id="op2")
    h1.process(1, write_rows(table, [(1, "hello1")]))
    h1.checkpoint(1)
    h2.process(1, write_rows(table, [(1, "hello2")]))
    h2.checkpoint(1)
    assert len(h1.staging_manifests()) == 2
    h1.notify(1)
    assert len(h1.staging_manifests()) == 1
    assert table_rows(table) == [(1, "hello1")] and snapshot_count(table) == 1
    assert h1.watermark() == 1 and h2.watermark() == -1
    h1.crash()
    h2.crash()

    h1.open()
    h2.open()
    assert h1.staging_manifests() == []
    assert table_rows(table) == [(1, "hello1"), (1, "hello2")]
    assert snapshot_count(table) == 2 and h1.watermark() == 1 and h2.watermark() == 1
    h1.process(2, write_rows(table, [(2, "world1")]))
    h1.checkpoint(2)
    h2.process(2, write_rows(table, [(2, "world2")]))
    h2.checkpoint(2)
    assert len(h1.staging_manifests()) == 2
    h1.notify(2)
    h2.notify(2)
    assert h1.staging_manifests() == []
    assert table_rows(table) == [(1, "hello1"), (1, "hello2"), (2, "world1"), (2, "world2")]
    assert snapshot_count(table) == 4 and h1.watermark() == 2 and h2.watermark() == 2


def test_bounded_stream(table: Table, harness: MakeHarness) -> None:
    """testBoundedStream: end of input checkpoints and commits what is pending."""
    h = harness(snapshot_properties=PROPS)
    assert h.staging_manifests() == [] and snapshot_count(table) == 0
    h.process(1, write_rows(table, [(1, "word-1")]))
    end_input(h.c)
    assert h.staging_manifests() == []
    assert table_rows(table) == [(1, "word-1")]
    assert snapshot_count(table) == 1 and h.watermark() == 1
    assert table.current_snapshot().summary["flink.test"] == PROPS["flink.test"]  # type: ignore[union-attr]
    assert h.storage.latest() is not None and h.storage.latest().checkpoint_id == 1  # type: ignore[union-attr]


def test_flink_manifests(table: Table, harness: MakeHarness) -> None:
    """testFlinkManifests: staging manifest name, content and cleanup."""
    h = harness()
    result = write_rows(table, [(1, "hello")])
    h.process(10, result)
    h.checkpoint(10)
    (name,) = h.staging_manifests()
    assert name.startswith("job-1-sink-10-10-") and name.endswith("-00001.avro")
    raw = h.c.state.get(staged_key(10))
    assert raw is not None
    ((batch_id, payload),) = decode_staged(raw, where="test")
    delta = deserialize_staged_manifests(payload, where="test")
    assert batch_id == 10 and delta.delete_manifests == ()
    assert delta.data_manifests[0].manifest_path.endswith("/" + name)
    assert read_staged_files(table.io, table.refresh().metadata, delta) == result
    h.notify(10)
    assert table_rows(table) == [(1, "hello")] and h.watermark() == 10
    assert h.staging_manifests() == []


def test_delete_files(table: Table, harness: MakeHarness) -> None:
    """testDeleteFiles: a batch with data and equality deletes; one data and one delete
    staging manifest."""
    h = harness()
    h.step(10, write_rows(table, [(1, "aaa")]))
    assert table_rows(table) == [(1, "aaa")] and h.watermark() == 10
    data = write_rows(table, [(2, "bbb")])
    h.process(11, WriteResult(data.data_files, (write_eq_deletes(table, [1]),)))
    h.checkpoint(11)
    assert len(h.staging_manifests()) == 2
    h.notify(11)
    assert table_rows(table) == [(2, "bbb")] and h.watermark() == 11
    assert h.staging_manifests() == []
    assert h.c.metrics.snapshot().committed_delete_files == 1


def test_commit_two_checkpoints_in_single_txn(table: Table, harness: MakeHarness) -> None:
    """testCommitTwoCheckpointsInSingleTxn: one notification, two row deltas."""
    h = harness()
    data1 = write_rows(table, [(1, "aaa"), (2, "bbb")])
    h.process(10, WriteResult(data1.data_files, (write_eq_deletes(table, [3]),)))
    h.checkpoint(10)
    data2 = write_rows(table, [(4, "ddd")])
    h.process(11, WriteResult(data2.data_files, (write_eq_deletes(table, [2]),)))
    h.checkpoint(11)
    h.notify(11)
    assert table_rows(table) == [(1, "aaa"), (4, "ddd")]
    assert h.watermark() == 11 and h.staging_manifests() == []
    snaps = table.refresh().snapshots()
    assert len(snaps) == 2
    assert [s.summary[MAX_COMMITTED_CHECKPOINT_ID] for s in snaps] == ["10", "11"]


def test_commit_multiple_checkpoints_for_v2_table(table: Table, harness: MakeHarness) -> None:
    """testCommitMultipleCheckpointsForV2Table: three batches updating the same keys in
    one checkpoint give no duplicates (one row delta per batch, Iceberg #10431)."""
    h = harness()
    for i in range(1, 4):
        h.process(10 + i, upsert_result(table, [(1, f"aaa{i}"), (2, f"bbb{i}")]))
    h.checkpoint(13)
    h.notify(13)
    assert table_rows(table) == [(1, "aaa3"), (2, "bbb3")]
    assert h.watermark() == 13 and h.staging_manifests() == []
    assert snapshot_count(table) == 3


def test_spec_evolution(table: Table, harness: MakeHarness) -> None:
    """testSpecEvolution: files staged with the spec they were written with, across a
    spec change and a restart."""
    h = harness()
    h.process(1, write_rows(table, [(1, "hello1")]))
    h.checkpoint(1)
    assert staged_spec_id(h, 1) == table.spec().spec_id == 0
    h.notify(1)

    old_spec = table.refresh().spec()
    change_table(table, lambda m: m.with_spec(build_partition_spec(m.schema, [("identity", "id")])))
    new_spec = table.refresh().spec()
    assert new_spec.spec_id == 1
    h.process(2, write_rows(table, [(2, "hello2")], spec=old_spec))
    h.checkpoint(2)
    assert staged_spec_id(h, 2) == old_spec.spec_id
    h.notify(2)
    assert h.staging_manifests() == []
    assert snapshot_count(table) == 2 and h.watermark() == 2
    h.crash()

    h.open()
    assert table_rows(table) == [(1, "hello1"), (2, "hello2")] and h.watermark() == 2
    h.process(3, write_rows(table, [(3, "world3")]))
    h.checkpoint(3)
    assert len(h.staging_manifests()) == 1
    assert staged_spec_id(h, 3) == new_spec.spec_id
    h.notify(3)
    assert h.staging_manifests() == []
    assert table_rows(table) == [(1, "hello1"), (2, "hello2"), (3, "world3")]
    assert snapshot_count(table) == 3 and h.watermark() == 3
    partitioned = [f for f in live_files(table) if f.spec_id == 1]
    assert [f.partition for f in partitioned] == [(3,)]


@pytest.mark.parametrize("shape", ["append", "row-delta"])
def test_snapshot_properties_and_sink_keys_on_every_snapshot(
    table: Table, harness: MakeHarness, shape: str
) -> None:
    props = {"app": "ingest", JOB_ID: "caller cannot override this"}
    h = harness(job_id="q-7", operator_id="events", snapshot_properties=props)
    for b in (0, 1):
        if shape == "append":
            h.process(b, write_rows(table, [(b, "x")]))
        else:
            h.process(b, upsert_result(table, [(b, "x")]))
    h.checkpoint(1)
    h.notify(1)
    snaps = table.refresh().snapshots()
    assert len(snaps) == (1 if shape == "append" else 2)
    for snap in snaps:
        assert snap.summary["app"] == "ingest"
        assert snap.summary[JOB_ID] == "q-7" and snap.summary[OPERATOR_ID] == "events"
    assert [s.summary[MAX_COMMITTED_CHECKPOINT_ID] for s in snaps] == (
        ["1"] if shape == "append" else ["0", "1"]
    )


def test_uncommitted_paths_while_the_sink_commits(
    harness: MakeHarness, table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-sink maintenance asks for the uncommitted files from its own thread while the
    sink's thread commits: a checkpoint committed in the middle of the walk neither
    breaks it nor loses a row."""
    h = harness()
    first, second = write_rows(table, [(1, "a")]), write_rows(table, [(2, "b")])
    h.process(1, first)
    h.checkpoint(1)
    h.process(2, second)
    h.checkpoint(2)
    staged = {f.file_path for r in (first, second) for f in r.data_files}
    assert staged <= h.c.uncommitted_paths()

    read_staged = h.c._read_staged
    committed: list[int] = []

    def commit_meanwhile(checkpoint_id: int, **kwargs: Any) -> Any:
        if not committed:
            committed.append(2)
            h.notify(2)  # the sink's thread commits both checkpoints here
        return read_staged(checkpoint_id, **kwargs)

    monkeypatch.setattr(h.c, "_read_staged", commit_meanwhile)
    assert h.c.uncommitted_paths() <= staged
    assert committed == [2]
    assert h.c.uncommitted_paths() == frozenset()
    assert table_rows(table) == [(1, "a"), (2, "b")]
    assert {f.file_path for f in live_files(table)} == staged
