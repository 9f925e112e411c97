"""Data, metadata and state directories that fail mid-batch (full disk, read-only):
the error names the sink, table, batch and path, says nothing is lost and keeps the
cause; once the storage is repaired a restart commits every batch exactly once.

Tests stream_sink.commit.io_context: storage failures said in the sink's terms."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import Harness, table_rows, write_rows
from storage_faults import requires_mount, tmpfs_at

from stream_sink.exceptions import SinkIOError
from stream_sink.table.table import Table

MakeHarness = Callable[..., Harness]
ALL = [(0, "a"), (1, "b"), (2, "c")]

pytestmark = requires_mount


def _assert_message(e: pytest.ExceptionInfo[SinkIOError], *needles: str) -> None:
    text = str(e.value)
    for needle in ("sink sink (table db.t)", "Nothing is lost", *needles):
        assert needle in text, text
    assert e.value.__cause__ is not None  # the original error stays visible


def test_full_metadata_directory_mid_batch_loses_nothing(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    with tmpfs_at(table.metadata_dir) as disk:
        h.process(1, write_rows(table, [(1, "b")]))
        disk.fill()
        with pytest.raises(SinkIOError) as e:
            h.checkpoint(1)
        _assert_message(e, "checkpoint 1", "writing staging manifest", table.metadata_dir, "ENOSPC")
        h.crash()
        disk.free()
        h.open(acknowledged=[0, 1])
        h.step(2, write_rows(table, [(2, "c")]))
        h.close()
    assert table_rows(table) == ALL


def test_read_only_metadata_directory_mid_commit_loses_nothing(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    with tmpfs_at(table.metadata_dir) as disk:
        h.process(1, write_rows(table, [(1, "b")]))
        h.checkpoint(1)
        disk.read_only()
        with pytest.raises(SinkIOError) as e:
            h.notify(1)
        _assert_message(e, "checkpoint 1: committing", table.metadata_dir, "Read-only")
        assert "Cannot delete" not in str(e.value)
        h.crash()
        disk.read_only(False)
        h.open(acknowledged=[0, 1])
        h.step(2, write_rows(table, [(2, "c")]))
        h.close()
    assert table_rows(table) == ALL


def test_full_state_directory_mid_batch_loses_nothing(
    tmp_path: Path, table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.crash()
    expected = [(0, "a")]
    with tmpfs_at(str(tmp_path / "state"), size="16m") as disk:
        h.open(acknowledged=[0])
        disk.fill()
        batch = 1
        with pytest.raises(SinkIOError) as e:
            while batch < 500:  # a log may hold a few records in space it already has
                h.process(batch, write_rows(table, [(batch, "b")]))
                h.checkpoint(batch)
                h.notify(batch)
                expected.append((batch, "b"))
                batch += 1
        _assert_message(e, "operator state at", h.state_dir)
        h.crash()
        disk.free()
        acked = [b for b, _ in expected]
        h.open(acknowledged=acked)  # the failed batch was not acknowledged: Spark re-runs it
        h.step(batch, write_rows(table, [(batch, "b")]))
        expected.append((batch, "b"))
        h.close()
    assert table_rows(table) == expected


def test_full_data_directory_names_the_file(table: Table) -> None:
    os.makedirs(table.data_location, exist_ok=True)
    with tmpfs_at(table.data_location, size="1m") as disk:
        disk.fill()
        with pytest.raises(SinkIOError, match=r"data file .*parquet failed: .*ENOSPC") as e:
            write_rows(table, [(i, "x" * 100) for i in range(50_000)])
        assert e.value.__cause__ is not None
        disk.free()
        assert os.listdir(table.data_location) == []  # the failed file was deleted


def test_full_data_directory_mid_batch_then_restart_commits_every_batch_once(
    table: Table, harness: MakeHarness
) -> None:
    """The executors' write of batch 1 fails on a full data directory: the batch never
    reaches the committer (Spark fails it and re-runs it after the restart), the table
    and state keep batch 0, and the re-run after the disk is repaired lands once."""
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    with tmpfs_at(table.data_location, size="1m") as disk:
        disk.fill()
        with pytest.raises(SinkIOError, match=r"data file .*parquet failed: .*ENOSPC"):
            write_rows(table, [(i, "x" * 100) for i in range(1, 50_000)])
        assert table_rows(table) == [(0, "a")]  # readable, nothing half-committed
        h.crash()
        disk.free()
        h.open(acknowledged=[0])  # batch 1 failed, so Spark never acknowledged it
        h.step(1, write_rows(table, [(1, "b")]))
        h.step(2, write_rows(table, [(2, "c")]))
        h.close()
    assert table_rows(table) == ALL
