"""The one reader of each format's sink watermark: stream_sink/commit/iceberg/watermark.py
(Iceberg: snapshot summaries and the durable record) and the Delta target's
``committed_watermark`` (stream_sink/commit/delta/target.py: the sink's ``txn``).

Tests stream_sink.ops.status.delta: the Delta sink's watermark as status reports it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from stream_sink.commit.delta.target import app_id
from stream_sink.commit.delta.target import committed_watermark as delta_watermark
from stream_sink.commit.iceberg.watermark import (
    JOB_ID,
    MAX_COMMITTED_CHECKPOINT_ID,
    OPERATOR_ID,
    SinkWatermark,
    WatermarkRecord,
    last_stamped,
    sink_watermarks,
    summary_stamp,
    watermark_property,
)
from stream_sink.delta import DeltaTable, Txn
from stream_sink.table.table import Table


def _commit(table: Table, summary: dict[str, str], properties: dict[str, str] | None = None) -> int:
    op = table.new_fast_append()
    op.set_all(summary)
    for key, value in (properties or {}).items():
        op.set_table_property(key, value)
    op.commit()
    snapshot = table.refresh().current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id


def test_a_summary_stamp_is_the_batch_id_whoever_stamped_it() -> None:
    assert summary_stamp({MAX_COMMITTED_CHECKPOINT_ID: "12"}) == 12
    assert summary_stamp({MAX_COMMITTED_CHECKPOINT_ID: "twelve"}) is None
    assert summary_stamp({"operation": "append"}) is None


def test_the_last_stamped_snapshot_is_the_newest_of_the_job_and_sink(table: Table) -> None:
    meta = table.refresh().metadata
    assert last_stamped(meta, meta.current_snapshot(), "j", "o") is None
    first = _commit(table, {JOB_ID: "j", OPERATOR_ID: "o", MAX_COMMITTED_CHECKPOINT_ID: "3"})
    _commit(table, {JOB_ID: "j", OPERATOR_ID: "other", MAX_COMMITTED_CHECKPOINT_ID: "8"})
    _commit(table, {"operation-by": "maintenance"})
    meta = table.refresh().metadata
    found = last_stamped(meta, meta.current_snapshot(), "j", "o")
    assert found is not None and (found[0].snapshot_id, found[1]) == (first, 3)


def test_each_sink_is_listed_with_its_newest_job_and_the_higher_of_stamp_and_record(
    table: Table,
) -> None:
    assert sink_watermarks(table.refresh().metadata) == []
    _commit(table, {JOB_ID: "old", OPERATOR_ID: "a", MAX_COMMITTED_CHECKPOINT_ID: "9"})
    a = _commit(table, {JOB_ID: "new", OPERATOR_ID: "a", MAX_COMMITTED_CHECKPOINT_ID: "2"})
    _commit(table, {JOB_ID: "jb", OPERATOR_ID: "b", MAX_COMMITTED_CHECKPOINT_ID: "5"})
    records = {
        # b's record is higher than its newest stamp (a commit whose snapshot expired)
        watermark_property("b"): WatermarkRecord("jb", 6, 1234).to_json(),
        # c has only a record; the record of another branch is not main's
        watermark_property("c"): WatermarkRecord("jc", 1, 99).to_json(),
        watermark_property("d", "audit"): WatermarkRecord("jd", 4, 98).to_json(),
    }
    _commit(table, {}, records)
    meta = table.refresh().metadata
    stamped_at = {s.snapshot_id: s.timestamp_ms for s in meta.snapshots}
    assert sink_watermarks(meta) == [
        SinkWatermark("a", "new", 2, a, stamped_at[a]),
        SinkWatermark("b", "jb", 6, 1234, None),
        SinkWatermark("c", "jc", 1, 99, None),
    ]


def test_a_delta_sinks_watermark_is_its_txn_version(tmp_path: Path) -> None:
    table = DeltaTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    assert delta_watermark(table.snapshot, "j", "o") == -1
    table.new_transaction().add(Txn(app_id("j", "o"), 7, None)).commit()
    table.new_transaction().add(Txn("another-writer", 70, None)).commit()
    snapshot = table.refresh().snapshot
    assert delta_watermark(snapshot, "j", "o") == 7
    assert delta_watermark(snapshot, "k", "o") == -1
