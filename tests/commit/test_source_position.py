"""stream_sink.commit.source_position, stream_sink.commit.iceberg.source_position and
stream_sink.commit.delta.source_position: the records of a sink's source offsets and event-time
watermark, written by the committer in the same commit as the data, read back, and the
checks of ``resume_from_table``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from harness import Harness, latest_summary, table_rows, write_rows

from stream_sink.commit import FilesCommitter, StateDirectory
from stream_sink.commit.delta.source_position import sink_position as delta_position
from stream_sink.commit.delta.target import DeltaTarget
from stream_sink.commit.iceberg.source_position import (
    complete_up_to,
    position_property,
    sink_position,
    sink_positions,
)
from stream_sink.commit.source_position import (
    EVENT_TIME_WATERMARK_MS,
    SOURCE_OFFSETS,
    BatchOffsets,
    ResumePoint,
    SourcePosition,
    check_resume,
    same_offsets,
    watermark_ms,
)
from stream_sink.delta import DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.writer import write_data_files
from stream_sink.exceptions import InvalidOptionError, SourcePositionError
from stream_sink.table.table import Table


@dataclass
class FakeOffsets:
    """An offset source: batch ``b`` ends at offset ``10 * (b + 1)`` of topic ``t``."""

    start: tuple[Any, ...] | None = ({"t": {"0": 0}},)
    unreadable: set[int] = field(default_factory=set)
    watermark_ms: Callable[[int], int | None] = lambda b: None
    where: str = "fake/offsets"

    def batch(self, batch_id: int) -> BatchOffsets:
        if batch_id in self.unreadable:
            raise FileNotFoundError(f"offsets/{batch_id}")
        mark = watermark_ms(self.watermark_ms(batch_id))  # as the offset log is read
        return BatchOffsets(batch_id, (ends(batch_id),), mark)

    def starting(self) -> tuple[Any, ...] | None:
        return self.start


def ends(batch_id: int) -> dict[str, dict[str, int]]:
    return {"t": {"0": 10 * (batch_id + 1)}}


# --- the records ---------------------------------------------------------------------------


def test_a_position_round_trips_through_json_and_names_its_resume_point() -> None:
    p = SourcePosition("q1", "s", 7, ({"t": {"0": 80}}, None), 1234, 99, 5)
    assert SourcePosition.from_json(p.to_json()) == p
    assert p.point == "q1:7"
    assert p.starting_offsets() == '{"t":{"0":80}}'
    with pytest.raises(SourcePositionError, match="no offsets for source 1"):
        p.starting_offsets(1)
    assert SourcePosition.from_json("{not json") is None
    unknown = SourcePosition("q1", "s", 7, None)
    with pytest.raises(SourcePositionError, match="without source offsets"):
        unknown.starting_offsets()


def test_resume_points_parse_job_and_batch_and_refuse_anything_else() -> None:
    assert ResumePoint.parse("a:b:c:12") == ResumePoint("a:b:c", 12)
    assert str(ResumePoint("q", 3)) == "q:3"
    for bad in ("q", "q:", ":3", "q:x", "q:-1"):
        with pytest.raises(InvalidOptionError, match="resume_from_table"):
            ResumePoint.parse(bad)


def test_offsets_compare_as_json_values_whatever_the_key_order() -> None:
    assert same_offsets([{"t": {"0": 1, "1": 2}}], [{"t": {"1": 2, "0": 1}}])
    assert not same_offsets([{"t": {"0": 1}}], [{"t": {"0": 2}}])


def test_check_resume_refuses_every_mismatch_with_what_to_do() -> None:
    recorded = SourcePosition("q1", "s", 4, (ends(4),))
    start = (ends(4),)
    args = {"table": "db.t", "sink_id": "s", "where": "ck/offsets"}
    assert check_resume(ResumePoint("q1", 4), recorded, start, **args) == recorded
    with pytest.raises(SourcePositionError, match="records no source position"):
        check_resume(ResumePoint("q1", 4), None, start, **args)
    with pytest.raises(SourcePositionError, match=r"is q1:4.*resume_from_table='q1:4'"):
        check_resume(ResumePoint("q1", 3), recorded, start, **args)
    with pytest.raises(SourcePositionError, match="is q1:4"):
        check_resume(ResumePoint("q0", 4), recorded, start, **args)
    with pytest.raises(SourcePositionError, match="without source offsets"):
        check_resume(ResumePoint("q1", 4), SourcePosition("q1", "s", 4, None), start, **args)
    with pytest.raises(SourcePositionError, match="cannot tell where the new query starts"):
        check_resume(ResumePoint("q1", 4), recorded, (None,), **args)
    with pytest.raises(SourcePositionError, match=r"starts at \[\{\"t\":\{\"0\":40\}\}\]"):
        check_resume(ResumePoint("q1", 4), recorded, (ends(3),), **args)


# --- Iceberg: written with the data, read back -----------------------------------------------


def test_iceberg_commits_record_the_offsets_and_watermark_of_their_highest_batch(
    harness: Callable[..., Harness], table: Table
) -> None:
    offsets = FakeOffsets(watermark_ms=lambda b: 1000 * b)  # batch 0: 0 means none
    h = harness(job_id="q1", operator_id="s", offsets=offsets)
    h.step(0, write_rows(table, [(1, "a")]))
    summary = latest_summary(table)
    assert summary[SOURCE_OFFSETS] == '[{"t":{"0":10}}]'
    assert EVENT_TIME_WATERMARK_MS not in summary
    h.process(1, write_rows(table, [(2, "b")]))
    h.process(2, write_rows(table, [(3, "c")]))
    h.checkpoint(2)
    h.notify(2)  # one append of batches 1 and 2: batch 2's end offsets
    summary = latest_summary(table)
    assert summary[SOURCE_OFFSETS] == '[{"t":{"0":30}}]'
    assert summary[EVENT_TIME_WATERMARK_MS] == "2000"
    metadata = table.refresh().metadata
    position = sink_position(metadata, "s")
    assert position is not None
    assert (position.point, position.sources, position.event_time_watermark_ms) == (
        "q1:2",
        (ends(2),),
        2000,
    )
    assert position.version == metadata.current_snapshot_id
    recorded = SourcePosition.from_json(metadata.properties[position_property("s")])
    assert recorded is not None and recorded.point == "q1:2"
    assert [p.sink_id for p in sink_positions(metadata)] == ["s"]
    first = complete_up_to(metadata, "s", 1500)
    assert first is not None and first.batch_id == 2
    assert complete_up_to(metadata, "s", 2001) is None
    assert table_rows(table) == [(1, "a"), (2, "b"), (3, "c")]


def test_an_unreadable_offset_log_records_unknown_offsets_not_an_older_position(
    harness: Callable[..., Harness], table: Table
) -> None:
    h = harness(job_id="q1", operator_id="s", offsets=FakeOffsets(unreadable={1}))
    h.step(0, write_rows(table, [(1, "a")]))
    h.step(1, write_rows(table, [(2, "b")]))
    assert latest_summary(table)[SOURCE_OFFSETS] == "null"
    position = sink_position(table.refresh().metadata, "s")
    assert position is not None and position.point == "q1:1" and position.sources is None


def test_without_an_offset_source_nothing_is_recorded(
    harness: Callable[..., Harness], table: Table
) -> None:
    h = harness(job_id="q1", operator_id="s")
    h.step(0, write_rows(table, [(1, "a")]))
    assert SOURCE_OFFSETS not in latest_summary(table)
    assert sink_position(table.refresh().metadata, "s") is None


def test_the_property_keeps_the_position_after_its_snapshots_expire(
    harness: Callable[..., Harness], table: Table
) -> None:
    h = harness(job_id="q1", operator_id="s", offsets=FakeOffsets(watermark_ms=lambda b: 5))
    h.step(0, write_rows(table, [(1, "a")]))
    table.refresh().append(pa.table({"id": [9], "data": ["other"]}))  # another writer
    table.refresh().maintenance.expire_snapshots(retain_last=1)
    metadata = table.refresh().metadata
    position = sink_position(metadata, "s")
    assert position is not None and position.point == "q1:0" and position.sources == (ends(0),)
    last = complete_up_to(metadata, "s", 5)
    assert last is not None and last.point == "q1:0"


# --- resuming a new query from the table -----------------------------------------------------


def test_a_resumed_query_drops_the_old_jobs_uncommitted_state_and_continues(
    harness: Callable[..., Harness], table: Table, tmp_path: Path
) -> None:
    old = harness(job_id="q1", operator_id="s", offsets=FakeOffsets())
    old.step(0, write_rows(table, [(1, "a")]))
    old.process(1, write_rows(table, [(2, "b")]))
    old.checkpoint(1)  # staged, never committed: the new query reads it again
    old.crash()
    new = harness(
        job_id="q2",
        operator_id="s",
        offsets=FakeOffsets(start=(ends(0),)),
        resume=ResumePoint("q1", 0),
    )
    assert new.c.staged_checkpoints == {} and new.c.pending_batch_ids == ()
    new.step(0, write_rows(table, [(2, "b")]))
    assert table_rows(table) == [(1, "a"), (2, "b")]
    position = sink_position(table.refresh().metadata, "s")
    assert position is not None and position.point == "q2:0"
    new.close()
    resume = ResumePoint("q1", 0)
    again = harness(job_id="q2", operator_id="s", offsets=FakeOffsets(), resume=resume)
    again.step(1, write_rows(table, [(3, "c")]))  # restarted: the resume is done, not re-checked
    assert table_rows(table) == [(1, "a"), (2, "b"), (3, "c")]


@pytest.mark.parametrize(
    ("point", "start", "message"),
    [
        (ResumePoint("q1", 1), (ends(1),), "is q1:0"),
        (ResumePoint("q1", 0), (ends(1),), "starts at"),
        (ResumePoint("q1", 0), None, "cannot tell where"),
    ],
)
def test_a_resume_that_does_not_match_the_table_is_refused_before_anything_changes(
    harness: Callable[..., Harness],
    table: Table,
    point: ResumePoint,
    start: tuple[Any, ...] | None,
    message: str,
) -> None:
    old = harness(job_id="q1", operator_id="s", offsets=FakeOffsets())
    old.step(0, write_rows(table, [(1, "a")]))
    old.close()
    with pytest.raises(SourcePositionError, match=message):
        harness(job_id="q2", operator_id="s", offsets=FakeOffsets(start=start), resume=point)
    assert table_rows(table) == [(1, "a")]


# --- Delta ----------------------------------------------------------------------------------

DELTA_SCHEMA = pa.schema([("id", pa.int64()), ("data", pa.string())])


def _delta_committer(loc: str, state: Path, **options: Any) -> FilesCommitter:
    c = FilesCommitter(
        DeltaTarget(DeltaTable.load(loc)),
        StateDirectory(str(state), kind="memory", sync=False),
        None,
        job_id=options.pop("job_id", "q1"),
        operator_id="s",
        **options,
    )
    c.restore()
    return c


def _delta_batch(loc: str, ids: list[int]) -> DeltaBatch:
    data = pa.table({"id": ids, "data": [str(i) for i in ids]}, schema=DELTA_SCHEMA)
    return DeltaBatch(tuple(write_data_files(loc, data, DELTA_SCHEMA, ())))


def test_delta_commits_record_the_position_in_commit_info(tmp_path: Path) -> None:
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, DELTA_SCHEMA)
    c = _delta_committer(loc, tmp_path / "state", offsets=FakeOffsets(watermark_ms=lambda b: 7))
    for batch in (0, 1):
        c.process(batch, _delta_batch(loc, [batch]))
        c.snapshot_state(batch)
        c.notify_checkpoint_complete(batch)
    table.append(pa.table({"id": [9], "data": ["x"]}, schema=DELTA_SCHEMA))  # another writer
    position = delta_position(table.log, "s")
    assert position is not None
    assert (position.point, position.sources, position.event_time_watermark_ms) == (
        "q1:1",
        (ends(1),),
        7,
    )
    assert position.version == 2
    assert c.target.source_position("s") == position
    c.close()
    assert delta_position(table.log, "other") is None
