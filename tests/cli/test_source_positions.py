"""stream_sink.cli.source_positions: ``stream-sink status --table T`` without a checkpoint
location prints what the table records of each sink's stream, and
``--starting-offsets`` the JSON that starts a new query there, and ``--complete-up-to``
the oldest version complete up to an event time (Iceberg and Delta)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.cli.main import main
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.commit.delta.target import DeltaTarget
from stream_sink.commit.source_position import BatchOffsets
from stream_sink.delta import DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.checkpoint import write_checkpoint
from stream_sink.delta.expired_logs import remove_expired_logs
from stream_sink.delta.writer import write_data_files
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([("id", pa.int64()), ("data", pa.string())])
WATERMARK_MS = 1_700_000_000_000


class Offsets:
    where = "offsets"

    def batch(self, batch_id: int) -> BatchOffsets:
        return BatchOffsets(batch_id, ({"events": {"0": 10 * (batch_id + 1)}},), WATERMARK_MS)

    def starting(self) -> tuple[Any, ...] | None:
        return None


def _commit(target: Any, state: Path, sink: str, results: list[Any]) -> None:
    c = FilesCommitter(
        target,
        StateDirectory(str(state), kind="memory", sync=False),
        None,
        job_id="q1",
        operator_id=sink,
        offsets=Offsets(),
    )
    c.restore()
    for batch, result in enumerate(results):
        c.process(batch, result)
        c.snapshot_state(batch)
        c.notify_checkpoint_complete(batch)
    c.close()


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    where = str(tmp_path / "warehouse")
    catalog = ss.load_catalog("cli", type="hadoop", warehouse=where)
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=SCHEMA)
    factory = TaskWriterFactory.for_table(table)
    results = []
    for batch in range(2):
        writer = factory.create(0, batch)
        writer.write(pa.table({"id": [batch], "data": ["x"]}, schema=SCHEMA))
        results.append(writer.complete())
    _commit(IcebergTarget(table), tmp_path / "state", "s", results)
    return where


def test_status_of_a_table_alone_prints_each_sinks_position(
    warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--table", "db.t", "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    lines = {
        k.strip(): v.strip() for k, v in (ln.strip().split("  ", 1) for ln in out.splitlines())
    }
    assert lines["resume_from_table"] == "q1:1"
    assert lines["source offsets"] == '[{"events":{"0":20}}]'
    assert lines["sink"] == "s"
    assert f"{WATERMARK_MS} (2023-11-14 22:13:20 UTC)" in out
    assert lines["event times"].startswith("none recorded")  # no event_time_column
    args = ["status", "--table", "db.t", "--warehouse", warehouse, "--format", "jsonl"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["resume_from_table"] == "q1:1" and doc["sink_id"] == "s"


def test_starting_offsets_are_printed_alone_for_the_next_query(
    warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["status", "--table", "db.t", "--warehouse", warehouse, "--starting-offsets"]
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == '{"events":{"0":20}}'
    assert main([*args, "--sink-id", "other"]) == 1
    assert "records no source position of sink other" in capsys.readouterr().err


def test_a_delta_tables_positions_are_read_from_its_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loc = str(tmp_path / "lake")
    DeltaTable.create(loc, SCHEMA)
    data = pa.table({"id": [1], "data": ["x"]}, schema=SCHEMA)
    batch = DeltaBatch(tuple(write_data_files(loc, data, SCHEMA, ())))
    _commit(DeltaTarget(DeltaTable.load(loc)), tmp_path / "state", "d", [batch])
    assert main(["status", "--table", loc, "--starting-offsets"]) == 0
    assert capsys.readouterr().out.strip() == '{"events":{"0":10}}'
    assert main(["status", "--table", loc]) == 0
    assert "version 1 at" in capsys.readouterr().out
    assert main(["table", "show", loc]) == 0
    shown = capsys.readouterr().out.split("source positions", 1)[1]
    assert "q1:0" in shown and '[{"events":{"0":10}}]' in shown


def test_a_delta_position_is_read_from_its_domain_after_log_cleanup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``domainMetadata``, ``status --table`` and ``table show`` find the position
    after Delta's log cleanup removed every commit that recorded it."""
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(
        loc, SCHEMA, configuration={"delta.feature.domainMetadata": "supported"}
    )
    data = pa.table({"id": [1], "data": ["x"]}, schema=SCHEMA)
    batch = DeltaBatch(tuple(write_data_files(loc, data, SCHEMA, ())))
    _commit(DeltaTarget(DeltaTable.load(loc)), tmp_path / "state", "d", [batch])
    table.refresh().append(data)  # another writer, then a checkpoint and the cleanup
    write_checkpoint(table.log, table.refresh().snapshot)
    remove_expired_logs(table.log, {}, now_ms=int(time.time() * 1000) + 31 * 24 * 3600 * 1000)
    assert table.log.list_commits() == [2]
    assert main(["status", "--table", loc, "--starting-offsets"]) == 0
    assert capsys.readouterr().out.strip() == '{"events":{"0":10}}'
    assert main(["status", "--table", loc]) == 0
    assert "version 1 at" in capsys.readouterr().out
    assert main(["table", "show", loc]) == 0
    shown = capsys.readouterr().out.split("source positions", 1)[1]
    assert "q1:0" in shown


def test_table_show_lists_each_sinks_position(
    warehouse: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["table", "show", "db.t", "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out.split("source positions", 1)[1]
    assert "q1:1" in out and '[{"events":{"0":20}}]' in out and str(WATERMARK_MS) in out
    assert "2023-11-14T22:13:20.000Z" in out  # the watermark as an ISO time too
    assert main(["table", "show", "db.t", "--warehouse", warehouse, "--format", "jsonl"]) == 0
    shown = json.loads(capsys.readouterr().out)["source_positions"]
    assert [(r["sink"], r["resume_from_table"]) for r in shown] == [("s", "q1:1")]
    assert shown[0]["event_time_watermark"] == "2023-11-14T22:13:20.000Z"


def test_complete_up_to_names_the_oldest_snapshot_whose_watermark_reaches_the_time(
    warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = ss.load_catalog("cli", type="hadoop", warehouse=warehouse).load_table("db.t")
    first = min(table.metadata.snapshots, key=lambda s: s.sequence_number).snapshot_id
    base = ["status", "--table", "db.t", "--warehouse", warehouse]
    for when in ("2023-11-14T22:13:20Z", str(WATERMARK_MS), "2023-11-14 23:13:20+01:00"):
        assert main([*base, "--complete-up-to", when]) == 0
        out = capsys.readouterr().out
        assert f"snapshot {first} at" in out and "and every later one" in out
        assert "2023-11-14T22:13:20.000Z (1700000000000)" in out
    assert main([*base, "--complete-up-to", "2023-11-14T22:13:21", "--format", "jsonl"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["sink_id"], doc["complete"], doc["version"]) == ("s", False, None)
    assert doc["complete_up_to_ms"] == WATERMARK_MS + 1000
    assert main([*base, "--complete-up-to", str(WATERMARK_MS + 1)]) == 0
    assert "none yet: the last recorded event-time watermark is 2023-11-14T22:13:20.000Z" in (
        capsys.readouterr().out
    )
    assert main([*base, "--complete-up-to", "yesterday"]) == 1
    err = capsys.readouterr().err
    assert "--complete-up-to 'yesterday'" in err and "ISO-8601" in err
    assert main([*base, "--complete-up-to", "2023-11-14", "--sink-id", "other"]) == 1


def test_complete_up_to_on_a_delta_table_names_a_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loc = str(tmp_path / "lake")
    DeltaTable.create(loc, SCHEMA)
    data = pa.table({"id": [1], "data": ["x"]}, schema=SCHEMA)
    batch = DeltaBatch(tuple(write_data_files(loc, data, SCHEMA, ())))
    _commit(DeltaTarget(DeltaTable.load(loc)), tmp_path / "state", "d", [batch])
    assert main(["status", "--table", loc, "--complete-up-to", "2023-11-14T00:00:00Z"]) == 0
    assert "version 1 at" in capsys.readouterr().out
