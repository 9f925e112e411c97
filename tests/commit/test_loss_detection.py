"""Lost or corrupt operator state: restore from the newest checkpoint, and refuse to start
when upstream acknowledged batches that nothing can bring back.

Tests stream_sink.commit.loss_check: refusing to start when acknowledged batches are lost.
Tests stream_sink.commit.state_recovery: operator state opened, or restored from the newest
checkpoint."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Callable

import pytest
from harness import Harness, table_rows, write_rows

from stream_sink.exceptions import DataLossError, SkippedBatchError
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

MakeHarness = Callable[..., Harness]


def corrupt(state_dir: str) -> None:
    """Overwrite the files that make a state directory readable with garbage."""
    for name in ("CURRENT", "state.log"):
        path = os.path.join(state_dir, name)
        if os.path.exists(path):
            with open(path, "wb") as f:
                f.write(b"\x00garbage, not a state file\xff" * 4)


def test_state_deleted_while_upstream_acknowledged_later_batches_refuses_to_start(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.step(1, write_rows(table, [(1, "b")]))
    h.process(2, write_rows(table, [(2, "c")]))  # acknowledged upstream, not checkpointed
    h.process(3, write_rows(table, [(3, "d")]))
    h.crash()
    shutil.rmtree(h.state_dir)
    with pytest.raises(DataLossError, match=r"acknowledged batches \[2, 3\]") as e:
        h.open(acknowledged=[0, 1, 2, 3])
    assert "checkpoint: 1" in str(e.value) and h.state_dir in str(e.value)
    assert table_rows(table) == [(0, "a"), (1, "b")]
    assert not os.path.exists(h.state_dir)  # nothing restored: the next start refuses too
    with pytest.raises(DataLossError, match=r"acknowledged batches \[2, 3\]"):
        h.open(acknowledged=[0, 1, 2, 3])


def test_state_deleted_restores_and_commits_the_newest_checkpoint(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.process(1, write_rows(table, [(1, "b")]))
    h.checkpoint(1)  # complete, never notified
    h.crash()
    shutil.rmtree(h.state_dir)
    h.open(acknowledged=[0, 1])
    assert table_rows(table) == [(0, "a"), (1, "b")] and h.watermark() == 1
    h.step(2, write_rows(table, [(2, "c")]))
    assert table_rows(table) == [(0, "a"), (1, "b"), (2, "c")]


def test_corrupt_state_is_moved_aside_and_the_checkpoint_restored(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.process(1, write_rows(table, [(1, "b")]))
    h.checkpoint(1)
    h.crash()
    corrupt(h.state_dir)
    h.open(acknowledged=[0, 1])
    assert table_rows(table) == [(0, "a"), (1, "b")] and h.watermark() == 1
    (aside,) = glob.glob(h.state_dir + ".corrupt-*")
    assert os.listdir(aside)  # kept for inspection, not deleted


def test_corrupt_state_with_unrecoverable_batches_is_left_in_place(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.process(1, write_rows(table, [(1, "b")]))
    h.crash()
    corrupt(h.state_dir)
    for _ in range(2):
        with pytest.raises(DataLossError, match=r"batches \[1\]"):
            h.open(acknowledged=[0, 1])
    assert glob.glob(h.state_dir + ".corrupt-*") == [] and os.listdir(h.state_dir)


def test_lost_state_without_any_checkpoint_still_detects_loss(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.process(0, write_rows(table, [(0, "a")]))
    h.crash()
    shutil.rmtree(h.state_dir)
    with pytest.raises(DataLossError, match=r"no completed checkpoint.*batches \[0\]"):
        h.open(acknowledged=[0])


def test_acknowledged_batches_the_watermark_covers_are_not_loss(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    for b in range(3):
        h.step(b, write_rows(table, [(b, "x")]))
    h.crash()
    shutil.rmtree(h.state_dir)
    h.open(acknowledged=[0, 1, 2])
    h.step(3, write_rows(table, [(3, "x")]))
    assert table_rows(table) == [(b, "x") for b in range(4)]


def test_acknowledged_empty_batches_are_not_reported_lost(
    table: Table, harness: MakeHarness
) -> None:
    """Batches that committed nothing (skipped empty checkpoints) are not under the
    table's watermark: the state records them as covered, so they are no loss."""
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.step(1, WriteResult())
    h.step(2, WriteResult())
    assert h.watermark() == 0  # the table's: the empty checkpoints were not committed
    h.crash()
    h.open(acknowledged=[0, 1, 2])
    h.step(3, write_rows(table, [(3, "b")]))
    assert table_rows(table) == [(0, "a"), (3, "b")]


def test_stale_state_copy_does_not_lose_acknowledged_batches(
    table: Table, harness: MakeHarness
) -> None:
    """A valid but older copy of the state put back: the batch processed after the copy
    was taken (acknowledged upstream) is in neither the copy nor the table."""
    h = harness()
    h.process(0, write_rows(table, [(0, "a")]))
    h.process(1, write_rows(table, [(1, "b")]))
    h.checkpoint(1)
    h.notify(1)
    h.crash()
    stale = h.state_dir + ".copy"
    shutil.copytree(h.state_dir, stale)
    h.open(acknowledged=[0, 1])
    h.process(2, write_rows(table, [(2, "c")]))  # pending, acknowledged upstream
    h.crash()
    newest = h.state_dir + ".newest"
    os.rename(h.state_dir, newest)
    shutil.copytree(stale, h.state_dir)
    for _ in range(2):  # refused, and refused again: nothing was changed
        with pytest.raises(DataLossError, match=r"acknowledged batches \[2\]") as e:
            h.open(acknowledged=[0, 1, 2])
        assert "stale copy" in str(e.value) and h.state_dir in str(e.value)
    assert table_rows(table) == [(0, "a"), (1, "b")]
    shutil.rmtree(h.state_dir)
    os.rename(newest, h.state_dir)  # the operator puts the newest state back
    h.open(acknowledged=[0, 1, 2])
    h.step(3, write_rows(table, [(3, "d")]))
    assert table_rows(table) == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]


def test_empty_batches_checkpointed_together_are_not_reported_lost(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.process(1, WriteResult())
    h.process(2, WriteResult())
    h.checkpoint(2)
    h.notify(2)
    h.crash()
    shutil.copytree(h.state_dir, h.state_dir + ".copy")
    h.open(acknowledged=[0, 1, 2])  # intact state
    h.crash()
    shutil.rmtree(h.state_dir)  # lost state: the newest checkpoint (2) covers them
    h.open(acknowledged=[0, 1, 2])
    h.step(3, write_rows(table, [(3, "b")]))
    assert table_rows(table) == [(0, "a"), (3, "b")]


def test_a_batch_the_front_door_saw_skipped_is_named_as_skipped_with_how_to_rerun_it(
    table: Table, harness: MakeHarness
) -> None:
    """Upstream acknowledged batch 1 without handing it to the sink (a foreachBatch
    function that returned early): the restore names it as skipped, not as a stale
    state, and says how to run it again; other unaccounted batches stay a stale state."""
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.c.record_skipped([1], "chk/spark")
    h.crash()
    for _ in range(2):  # refused, and refused again: nothing was changed
        with pytest.raises(SkippedBatchError, match=r"batch\(es\) \[1\]") as e:
            h.open(acknowledged=[0, 1])
        text = str(e.value)
        assert "returned without calling the sink" in text and "stale" not in text
        assert "stream-sink rewind --spark-checkpoint-location chk/spark --batch 1" in text
    with pytest.raises(DataLossError, match=r"acknowledged batches \[1, 2\]") as stale:
        h.open(acknowledged=[0, 1, 2])
    assert not isinstance(stale.value, SkippedBatchError)
    assert "returned without calling the sink" in str(stale.value)  # one cause it names
    h.open(acknowledged=[0])  # once Spark forgets batch 1 (a rewind), the sink starts
    h.step(1, write_rows(table, [(1, "b")]))
    assert table_rows(table) == [(0, "a"), (1, "b")]


def test_acknowledged_batches_that_read_no_input_are_accounted_for(
    table: Table, harness: MakeHarness
) -> None:
    """Spark's no-data batches (an event-time watermark moving) never reached the sink
    when the foreachBatch function skipped empty batches: nothing is lost, so the sink
    starts; a batch that read input is still refused, with the state lost or intact."""
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.crash()
    no_input = {1, 2}
    h.open(acknowledged=[0, 1, 2], had_input=lambda b: b not in no_input)
    h.step(3, write_rows(table, [(3, "d")]))
    h.crash()
    with pytest.raises(DataLossError, match=r"acknowledged batches \[4\]"):
        h.open(acknowledged=[0, 1, 2, 3, 4, 5], had_input=lambda b: b != 5)
    shutil.rmtree(h.state_dir)
    with pytest.raises(DataLossError, match=r"batches \[4\]"):
        h.open(acknowledged=[0, 1, 2, 3, 4, 5], had_input=lambda b: b != 5)
    assert table_rows(table) == [(0, "a"), (3, "d")]
