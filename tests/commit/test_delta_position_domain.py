"""stream_sink.commit.delta.source_position on a table with the ``domainMetadata``
feature: each commit writes the sink's position domain in the same version as its data
and ``txn``, holding the JSON an Iceberg sink keeps in its table property; the position
is found after log cleanup removed every commit that recorded it; a table without the
feature gets no domain and keeps its protocol."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from delta_readers import delta_rs_rows, duckdb_delta_rows

from stream_sink.commit import FilesCommitter, StateDirectory
from stream_sink.commit.delta.source_position import (
    complete_up_to,
    position_domain,
    recorded_position,
    sink_position,
    sink_positions,
)
from stream_sink.commit.delta.target import DeltaTarget
from stream_sink.commit.source_position import BatchOffsets, SourcePosition
from stream_sink.delta import DeltaTable, Protocol, Txn
from stream_sink.delta.actions import DomainMetadata
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.checkpoint import write_checkpoint
from stream_sink.delta.expired_logs import remove_expired_logs
from stream_sink.delta.writer import write_data_files

SCHEMA = pa.schema([("id", pa.int64()), ("data", pa.string())])
FEATURE = {"delta.feature.domainMetadata": "supported"}
DAY_MS = 24 * 3600 * 1000


class Offsets:
    """Batch ``b`` ends at offset ``10 * (b + 1)`` of topic ``t``; watermark ``1000 * b``."""

    where = "fake/offsets"

    def batch(self, batch_id: int) -> BatchOffsets:
        return BatchOffsets(batch_id, (ends(batch_id),), 1000 * batch_id or None)

    def starting(self) -> tuple[Any, ...] | None:
        return ({"t": {"0": 0}},)


def ends(batch_id: int) -> dict[str, dict[str, int]]:
    return {"t": {"0": 10 * (batch_id + 1)}}


def committer(loc: str, state: Path) -> FilesCommitter:
    c = FilesCommitter(
        DeltaTarget(DeltaTable.load(loc)),
        StateDirectory(str(state), kind="memory", sync=False),
        None,
        job_id="q1",
        operator_id="s",
        offsets=Offsets(),
    )
    c.restore()
    return c


def run_batches(loc: str, state: Path, batches: range) -> None:
    c = committer(loc, state)
    for b in batches:
        data = pa.table({"id": [b], "data": [str(b)]}, schema=SCHEMA)
        c.process(b, DeltaBatch(tuple(write_data_files(loc, data, SCHEMA, ()))))
        c.snapshot_state(b)
        c.notify_checkpoint_complete(b)
    c.close()


def clean_up_log(table: DeltaTable) -> None:
    """Checkpoint the newest version, then Delta's log cleanup as 31 days from now: every
    commit below the checkpoint goes."""
    snapshot = table.refresh().snapshot
    write_checkpoint(table.log, snapshot)
    remove_expired_logs(table.log, {}, now_ms=int(time.time() * 1000) + 31 * DAY_MS)
    assert table.log.list_commits() == [snapshot.version]


def test_each_commit_writes_the_position_domain_with_its_data(tmp_path: Path) -> None:
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, SCHEMA, configuration=FEATURE)
    run_batches(loc, tmp_path / "state", range(3))
    snapshot = table.refresh().snapshot
    commit = table.log.read_commit(snapshot.version)
    domains = [a for a in commit if isinstance(a, DomainMetadata)]
    assert (
        [d.domain for d in domains] == [position_domain("s")] == ["stream-sink.source-position.s"]
    )
    assert any(isinstance(a, Txn) for a in commit)  # the same version as the watermark
    record = SourcePosition.from_json(domains[0].configuration)
    logged = sink_position(table.log, "s")
    assert record == logged == recorded_position(snapshot, "s")
    assert record is not None
    assert (record.point, record.sources, record.version) == ("q1:2", (ends(2),), 3)
    assert record.event_time_watermark_ms == 2000
    assert record.timestamp_ms is not None


def test_the_position_outlives_log_cleanup_of_its_commits(tmp_path: Path) -> None:
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, SCHEMA, configuration=FEATURE)
    run_batches(loc, tmp_path / "state", range(3))
    before = sink_position(table.log, "s")
    for n in range(3):  # another writer keeps committing: no position in these
        table.append(pa.table({"id": [100 + n], "data": ["x"]}, schema=SCHEMA))
    clean_up_log(table)
    found = sink_position(table.log, "s")
    assert found == before
    assert found is not None and found.version == 3
    assert sink_positions(table.log) == [found]
    assert complete_up_to(table.log, "s", 2000) == found
    assert complete_up_to(table.log, "s", 2001) is None
    assert DeltaTarget(DeltaTable.load(loc)).source_position("s") == found
    run_batches(loc, tmp_path / "state", range(3, 4))  # the sink goes on from the record
    newer = sink_position(table.log, "s")
    assert newer is not None and newer.point == "q1:3"


def test_a_table_without_the_feature_gets_no_domain_and_keeps_its_protocol(
    tmp_path: Path,
) -> None:
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, SCHEMA)
    run_batches(loc, tmp_path / "state", range(2))
    snapshot = table.refresh().snapshot
    assert snapshot.protocol == Protocol(1, 2)
    assert snapshot.domains == {}
    assert not any(
        isinstance(a, DomainMetadata) for v in range(3) for a in table.log.read_commit(v)
    )
    position = sink_position(table.log, "s")
    assert position is not None and position.point == "q1:1"  # from the commitInfo
    table.append(pa.table({"id": [100], "data": ["x"]}, schema=SCHEMA))  # another writer
    clean_up_log(table)
    assert sink_position(table.log, "s") is None  # what the feature is for


def test_other_engines_read_the_sinks_table_with_its_domain_and_checkpoint(
    tmp_path: Path,
) -> None:
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, SCHEMA, configuration=FEATURE)
    run_batches(loc, tmp_path / "state", range(3))
    clean_up_log(table)
    run_batches(loc, tmp_path / "state", range(3, 4))
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == [0, 1, 2, 3]
    assert sorted(r["id"] for r in duckdb_delta_rows(loc)) == [0, 1, 2, 3]


def test_a_running_sink_writes_the_domain_once_the_feature_is_added(tmp_path: Path) -> None:
    """The feature added the Delta way (here by delta-rs, as Spark's ``ALTER TABLE ... SET
    TBLPROPERTIES ('delta.feature.domainMetadata' = 'supported')`` does) while the sink
    runs: its next commit writes the domain."""
    import deltalake

    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, SCHEMA)
    c = committer(loc, tmp_path / "state")
    for b in range(3):
        if b == 2:
            deltalake.DeltaTable(loc).alter.add_feature(
                deltalake.TableFeatures.DomainMetadata, allow_protocol_versions_increase=True
            )
        data = pa.table({"id": [b], "data": [str(b)]}, schema=SCHEMA)
        c.process(b, DeltaBatch(tuple(write_data_files(loc, data, SCHEMA, ()))))
        c.snapshot_state(b)
        c.notify_checkpoint_complete(b)
    c.close()
    record = recorded_position(table.refresh().snapshot, "s")
    assert record is not None and record.point == "q1:2"
    assert record == sink_position(table.log, "s")
