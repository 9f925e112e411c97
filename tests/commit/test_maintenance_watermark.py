"""The watermark survives maintenance: after a compaction and an expiry down to one
snapshot (no snapshot the sink stamped is left), a restarted sink still knows what it
committed, so it neither re-commits a committed batch (whose files the expiry may have
deleted) nor drops an uncommitted one. The record is a table property set in the same
metadata commit as each sink snapshot."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from harness import Harness, live_files, table_rows, write_rows

from stream_sink.commit.iceberg.watermark import watermark_property
from stream_sink.table.snapshots import SnapshotRef
from stream_sink.table.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "table"))
from compaction import commit_compaction, plan_compaction

FAR_FUTURE = int(time.time() * 1000) + 10**9


def batch_rows(b: int) -> list[tuple[int, str]]:
    return [(b * 10 + i, f"b{b}") for i in range(3)]


def compact_and_expire(table: Table) -> None:
    t = table.catalog.load_table(table.identifier)
    commit_compaction(t, plan_compaction(t), use_starting_sequence_number=True)
    t.new_expire_snapshots().expire_older_than(FAR_FUTURE).retain_last(1).commit()


def test_record_is_set_with_every_sink_snapshot(table: Table, harness) -> None:  # type: ignore[no-untyped-def]
    h: Harness = harness()
    for b in range(2):
        h.step(b, write_rows(table, batch_rows(b)))
    meta = table.refresh().metadata
    record = json.loads(meta.properties[watermark_property("sink")])
    assert record == {
        "job-id": "job-1",
        "checkpoint-id": 1,
        "snapshot-id": meta.current_snapshot_id,
    }


def test_committed_batch_in_state_is_not_replayed_after_compaction_and_expiry(
    tmp_path: Path, table: Table, backend: str
) -> None:
    h = Harness(tmp_path, table, backend, job_id="job-1")
    h.open()
    for b in range(3):
        h.step(b, write_rows(table, batch_rows(b)))
    h.process(3, write_rows(table, batch_rows(3)))
    h.checkpoint(3)
    h.crash()
    saved = tmp_path / "saved-state"
    shutil.copytree(h.state_dir, saved)  # the state as a kill after the table commit leaves it
    h.open()  # restore commits staged batch 3
    h.close()
    shutil.rmtree(h.state_dir)
    shutil.copytree(saved, h.state_dir)
    compact_and_expire(table)
    assert len(table.refresh().snapshots()) == 1
    assert h.watermark() == 3

    h.open()  # restore again: batch 3 is still staged in this state, but committed
    expected = sorted(r for b in range(4) for r in batch_rows(b))
    assert table_rows(table) == expected
    assert all(Path(f.file_path).exists() for f in live_files(table))
    h.step(4, write_rows(table, batch_rows(4)))
    assert table_rows(table) == sorted(expected + batch_rows(4))
    h.close()


def test_uncommitted_staged_batch_is_committed_after_maintenance(
    tmp_path: Path, table: Table, backend: str
) -> None:
    h = Harness(tmp_path, table, backend, job_id="job-1")
    h.open()
    for b in range(2):
        h.step(b, write_rows(table, batch_rows(b)))
    h.process(2, write_rows(table, batch_rows(2)))
    h.checkpoint(2)
    h.crash()
    compact_and_expire(table)
    h.open()
    assert table_rows(table) == sorted(r for b in range(3) for r in batch_rows(b))
    assert h.watermark() == 2
    h.close()


def test_record_of_a_rolled_back_commit_is_ignored(table: Table, harness) -> None:  # type: ignore[no-untyped-def]
    h: Harness = harness()
    h.step(0, write_rows(table, batch_rows(0)))
    first = table.refresh().current_snapshot()
    assert first is not None
    h.step(1, write_rows(table, batch_rows(1)))
    meta = table.refresh().metadata.with_ref("main", SnapshotRef(first.snapshot_id))
    table.catalog.commit(table.identifier, table.metadata_location, meta)
    assert h.watermark() == 0  # the record names snapshot of batch 1, no longer on main
