"""stream_sink.commit.iceberg.event_time and stream_sink.commit.delta.event_time: with an
``event_time_column`` each commit records the low and high event time of the data files it
adds, from their column statistics, in the same version as the data; the column is
checked when the target is made, files without statistics record nothing, and
``stream-sink status --table`` shows what was recorded."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.cli.main import main
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.commit.delta.event_time import stat_ms
from stream_sink.commit.delta.source_position import sink_position as delta_position
from stream_sink.commit.delta.target import DeltaTarget
from stream_sink.commit.iceberg.event_time import to_ms
from stream_sink.commit.iceberg.source_position import sink_position
from stream_sink.commit.source_position import (
    EVENT_TIME_HIGH_MS,
    EVENT_TIME_LOW_MS,
    BatchOffsets,
    SourcePosition,
    span,
)
from stream_sink.delta import DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.writer import write_data_files
from stream_sink.exceptions import InvalidOptionError
from stream_sink.table.table import Table
from stream_sink.table.types import DateType, LongType, TimestampNanoType, TimestamptzType
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([("id", pa.int64()), ("at", pa.timestamp("us", "UTC")), ("day", pa.date32())])
T0 = datetime(2024, 5, 2, 12, 0, tzinfo=timezone.utc)
T0_MS = 1_714_651_200_000


class Offsets:
    where = "offsets"

    def batch(self, batch_id: int) -> BatchOffsets:
        return BatchOffsets(batch_id, ({"t": {"0": batch_id + 1}},), None)

    def starting(self) -> tuple[Any, ...] | None:
        return None


def rows(*micros_after_t0: int | None) -> pa.Table:
    ats = [None if m is None else T0_MS * 1000 + m for m in micros_after_t0]
    n = len(ats)
    return pa.table(
        {
            "id": list(range(n)),
            "at": pa.array(ats, pa.timestamp("us", "UTC")),
            "day": pa.array([19845] * n, pa.date32()),
        },
        schema=SCHEMA,
    )


def commit(target: Any, state: Path, results: list[Any], offsets: Any = None) -> None:
    c = FilesCommitter(
        target,
        StateDirectory(str(state), kind="memory", sync=False),
        None,
        job_id="q1",
        operator_id="s",
        offsets=offsets or Offsets(),
    )
    c.restore()
    for batch, result in enumerate(results):
        c.process(batch, result)
        c.snapshot_state(batch)
        c.notify_checkpoint_complete(batch)
    c.close()


def iceberg_files(table: Table, *tables: pa.Table) -> Any:
    writer = TaskWriterFactory.for_table(table).create(0, 0)
    for t in tables:
        writer.write(t)
    return writer.complete()


@pytest.fixture
def catalog(tmp_path: Path) -> Any:
    c = ss.load_catalog("et", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    c.create_namespace("db")
    return c


# --- the conversions ------------------------------------------------------------------------


def test_values_become_epoch_ms_rounded_outwards() -> None:
    assert to_ms(TimestamptzType(), 1_500, upper=False) == 1
    assert to_ms(TimestamptzType(), 1_500, upper=True) == 2
    assert to_ms(TimestamptzType(), -1_500, upper=False) == -2
    assert to_ms(TimestampNanoType(), 2_000_000, upper=True) == 2
    assert to_ms(DateType(), 1, upper=True) == 86_400_000
    assert to_ms(LongType(), 7, upper=False) == 7
    assert stat_ms("2024-05-02T12:00:00.001Z") == T0_MS + 1
    assert stat_ms("2024-05-02T12:00:00.001") == T0_MS + 1  # no zone: UTC
    assert stat_ms("2024-05-02") == T0_MS - 12 * 3_600_000
    assert stat_ms(T0_MS) == T0_MS
    assert stat_ms("soon") is None and stat_ms(True) is None and stat_ms(None) is None
    assert span([(5, 9), (1, 6)]) == (1, 9)
    assert span([(5, 9), None]) is None and span([]) is None


def test_a_position_keeps_its_event_times_through_json() -> None:
    p = SourcePosition("q1", "s", 3, None, None, 9, 8, T0_MS, T0_MS + 5)
    assert SourcePosition.from_json(p.to_json()) == p


# --- Iceberg --------------------------------------------------------------------------------


def test_iceberg_commits_record_the_event_time_range_of_their_data_files(
    catalog: Any, tmp_path: Path
) -> None:
    table = catalog.create_table("db.t", schema=SCHEMA)
    target = IcebergTarget(table, event_time_column="at")
    first = iceberg_files(table, rows(0, 1_500, None))
    second = iceberg_files(table, rows(None, None))  # only nulls: adds nothing
    commit(target, tmp_path / "state", [first, second])
    summaries = [s.summary for s in table.refresh().metadata.snapshots]
    assert [(s[EVENT_TIME_LOW_MS], s.get(EVENT_TIME_HIGH_MS)) for s in summaries[:1]] == [
        (str(T0_MS), str(T0_MS + 2))
    ]
    assert EVENT_TIME_LOW_MS not in summaries[1]
    position = sink_position(table.refresh().metadata, "s")
    assert position is not None and position.batch_id == 1  # batch 1's files: nulls only
    assert (position.event_time_low_ms, position.event_time_high_ms) == (None, None)
    earlier = SourcePosition.from_json(summaries[0]["stream-sink.source-offsets"])
    assert earlier is None  # the summary's keys are plain strings, not a position


def test_iceberg_records_a_dates_range_and_the_durable_record_keeps_it(
    catalog: Any, tmp_path: Path
) -> None:
    table = catalog.create_table("db.t", schema=SCHEMA)
    commit(
        IcebergTarget(table, event_time_column="day"),
        tmp_path / "state",
        [iceberg_files(table, rows(0))],
    )
    position = sink_position(table.refresh().metadata, "s")
    day_ms = 19845 * 86_400_000
    assert position is not None
    assert (position.event_time_low_ms, position.event_time_high_ms) == (day_ms, day_ms)
    table.refresh().append(rows(5))  # another writer, then the sink's snapshot expires
    table.refresh().maintenance.expire_snapshots(retain_last=1)
    kept = sink_position(table.refresh().metadata, "s")
    assert kept is not None and kept.event_time_low_ms == day_ms


def test_iceberg_files_without_statistics_for_the_column_record_nothing(
    catalog: Any, tmp_path: Path
) -> None:
    table = catalog.create_table(
        "db.t", schema=SCHEMA, properties={"write.metadata.metrics.default": "counts"}
    )
    commit(
        IcebergTarget(table, event_time_column="at"),
        tmp_path / "state",
        [iceberg_files(table, rows(0, 5))],
    )
    summary = table.refresh().current_snapshot().summary
    assert EVENT_TIME_LOW_MS not in summary and EVENT_TIME_HIGH_MS not in summary


def test_iceberg_checks_the_column_when_the_target_is_made(catalog: Any) -> None:
    table = catalog.create_table("db.t", schema=pa.schema([*SCHEMA, pa.field("note", pa.string())]))
    IcebergTarget(table, event_time_column="id")  # a long: epoch ms
    with pytest.raises(InvalidOptionError, match=r"event_time_column='nope'.*no such column"):
        IcebergTarget(table, event_time_column="nope")
    with pytest.raises(InvalidOptionError, match=r"event_time_column='note'.*is string"):
        IcebergTarget(table, event_time_column="note")


# --- Delta ----------------------------------------------------------------------------------


def delta_files(loc: str, data: pa.Table) -> DeltaBatch:
    return DeltaBatch(tuple(write_data_files(loc, data, SCHEMA, ())))


def test_delta_commits_record_the_event_time_range_in_commit_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loc = str(tmp_path / "lake")
    DeltaTable.create(loc, SCHEMA)
    target = DeltaTarget(DeltaTable.load(loc), event_time_column="at")
    commit(target, tmp_path / "state", [delta_files(loc, rows(0, 1_500, None))])
    position = delta_position(DeltaTable.load(loc).log, "s")
    assert position is not None
    assert (position.event_time_low_ms, position.event_time_high_ms) == (T0_MS, T0_MS + 2)
    assert main(["status", "--table", loc]) == 0
    shown = capsys.readouterr().out
    assert "2024-05-02T12:00:00.000Z .. 2024-05-02T12:00:00.002Z" in shown
    assert main(["table", "show", loc, "--format", "jsonl"]) == 0
    row = json.loads(capsys.readouterr().out)["source_positions"][0]
    assert row["event_times"] == "2024-05-02T12:00:00.000Z..2024-05-02T12:00:00.002Z"


def test_delta_adds_without_stats_record_nothing(tmp_path: Path) -> None:
    loc = str(tmp_path / "lake")
    DeltaTable.create(loc, SCHEMA)
    batch = delta_files(loc, rows(0))
    bare = DeltaBatch(tuple(type(a)(a.path, a.partition_values, a.size, 0) for a in batch.adds))
    commit(DeltaTarget(DeltaTable.load(loc), event_time_column="at"), tmp_path / "s", [bare])
    position = delta_position(DeltaTable.load(loc).log, "s")
    assert position is not None and position.event_time_low_ms is None


def test_delta_checks_the_column_when_the_target_is_made(tmp_path: Path) -> None:
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, pa.schema([*SCHEMA, pa.field("note", pa.string())]))
    DeltaTarget(table, event_time_column="day")
    with pytest.raises(InvalidOptionError, match=r"event_time_column='nope'.*no such"):
        DeltaTarget(table, event_time_column="nope")
    with pytest.raises(InvalidOptionError, match=r"event_time_column='note'.*is string"):
        DeltaTarget(table, event_time_column="note")
