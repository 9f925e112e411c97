"""A TRUNCATE of the source table through the commit protocol, without Spark: a batch
whose result truncates empties the table in the one snapshot (Delta: version) that adds
its files, in batch order among the other batches of its checkpoint, exactly once
across a restart. Tables read back by DuckDB (Iceberg) and delta-rs and DuckDB (Delta).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from changelog import TRUNCATE, TRUNCATING_BATCHES, expected_rows, write_changes
from delta_readers import delta_rs_rows, duckdb_delta_rows
from harness import Harness, latest_summary, live_files, table_rows

from stream_sink.commit import FilesCommitter, StateDirectory
from stream_sink.commit.delta.target import DeltaTarget
from stream_sink.commit.iceberg.staging import (
    StagedManifests,
    deserialize_staged_manifests,
    serialize_staged_manifests,
)
from stream_sink.commit.shapes import Shape, StagedBatch, plan_commits
from stream_sink.delta import DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.writer import write_data_files
from stream_sink.exceptions import ValidationError
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult

SCHEMA = pa.schema([("id", pa.int64()), ("data", pa.string())])


def _version(raw: bytes, magic: bytes) -> int:
    assert raw.startswith(magic)
    return int.from_bytes(raw[len(magic) : len(magic) + 2], "big")


def test_only_a_truncating_batch_is_written_in_the_format_version_that_says_so() -> None:
    """Old readers refuse a truncating payload (UnsupportedError) instead of dropping the
    truncate; every other payload stays in version 1, byte for byte as before."""
    plain, cut = WriteResult(), WriteResult(truncate=True)
    assert _version(plain.to_bytes(), b"SSWR") == 1
    assert _version(cut.to_bytes(), b"SSWR") == 2
    assert WriteResult.from_bytes(cut.to_bytes()) == cut and not cut.is_empty
    assert WriteResult.merge([plain, cut]).truncate
    delta = DeltaBatch(truncate=True)
    assert _version(DeltaBatch().to_bytes(), b"SSDB") == 1
    assert _version(delta.to_bytes(), b"SSDB") == 2
    assert DeltaBatch.from_bytes(delta.to_bytes()) == delta and not delta.is_empty
    staged = StagedManifests(truncate=True)
    raw = serialize_staged_manifests(staged)
    assert _version(raw, b"SSDM") == 2 and not staged.is_empty
    assert deserialize_staged_manifests(raw, where="test") == staged
    assert _version(serialize_staged_manifests(StagedManifests()), b"SSDM") == 1


def _staged(batch_id: int, files: WriteResult) -> StagedBatch:
    return StagedBatch(batch_id, batch_id, b"", files)


def test_a_truncating_batch_gets_a_snapshot_of_its_own_between_appends(table: Table) -> None:
    data = write_changes(table, [("+I", 1, "a")])
    groups = plan_commits(
        [_staged(0, data), _staged(1, WriteResult(truncate=True)), _staged(2, data)], "append", 2
    )
    assert [(g.shape, [b.batch_id for b in g.batches]) for g in groups] == [
        (Shape.ROW_DELTA, [0]),
        (Shape.ROW_DELTA, [1]),
        (Shape.ROW_DELTA, [2]),
    ]
    with pytest.raises(ValidationError, match="overwrite mode cannot apply a TRUNCATE"):
        plan_commits([_staged(0, WriteResult(truncate=True))], "overwrite", 0)


def test_truncating_batches_of_one_checkpoint_commit_in_order_exactly_once(
    tmp_path: Path, table: Table
) -> None:
    """Batches 0..3 staged in one checkpoint, batch 2 truncating mid-batch, batch 4 a
    truncate alone, batch 5 after it; a crash after staging the second checkpoint: the
    restart commits it once."""
    h = Harness(tmp_path, table, "rocksdb", job_id="job-1")
    h.open()
    for batch_id in range(4):
        h.process(batch_id, write_changes(table, TRUNCATING_BATCHES[batch_id]))
    h.checkpoint(3)
    h.notify(3)
    assert table_rows(table) == expected_rows(TRUNCATING_BATCHES[:4])
    head = latest_summary(table)
    assert head["stream-sink.max-committed-checkpoint-id"] == "3"
    snapshots = table.refresh().snapshots()
    truncated = snapshots[-2]  # batch 2's own snapshot
    assert truncated.summary["stream-sink.max-committed-checkpoint-id"] == "2"
    assert truncated.summary["operation"] == "overwrite"
    assert int(truncated.summary["deleted-data-files"]) >= 2
    got = table.scan(snapshot_id=truncated.snapshot_id).to_arrow().to_pylist()
    assert sorted((r["id"], r["data"]) for r in got) == expected_rows(TRUNCATING_BATCHES[:3])

    for batch_id in (4, 5):
        h.process(batch_id, write_changes(table, TRUNCATING_BATCHES[batch_id]))
    h.checkpoint(5)
    h.crash()  # staged, not committed
    h.open(acknowledged=range(6))
    assert table_rows(table) == expected_rows(TRUNCATING_BATCHES) == [(12, "l0")]
    assert h.watermark() == 5
    h.close()
    h.open(acknowledged=range(6))  # nothing left to commit: the table stays
    h.close()
    assert table_rows(table) == [(12, "l0")]
    assert sum(f.record_count for f in live_files(table) if not f.is_delete) == 2  # batch 5
    ops = [s.summary["operation"] for s in table.refresh().snapshots()]
    assert ops.count("delete") == 1  # batch 4: a truncate alone removes and adds nothing


def test_a_truncate_in_a_v3_table_removes_its_deletion_vectors(
    tmp_path: Path, warehouse: object
) -> None:
    table = warehouse.create_table(  # type: ignore[attr-defined]
        "db.v3", schema=pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())]),
        identifier_fields=["id"], format_version=3,
    )  # fmt: skip
    h = Harness(tmp_path, table, "memory", job_id="job-1")
    h.open()
    h.step(0, write_changes(table, TRUNCATING_BATCHES[0]))  # updates a row it inserted: a DV
    assert any(f.is_deletion_vector for f in live_files(table))
    h.step(1, write_changes(table, [(TRUNCATE, 0, ""), ("+I", 7, "g")]))
    h.close()
    assert table_rows(table) == [(7, "g")]
    assert not any(f.is_deletion_vector for f in live_files(table))


def _delta_committer(loc: str, state: Path) -> FilesCommitter:
    c = FilesCommitter(
        DeltaTarget(DeltaTable.load(loc)),
        StateDirectory(str(state), kind="rocksdb", sync=False),
        None,
        job_id="q",
        operator_id="s",
    )
    c.restore()
    return c


def test_delta_truncate_removes_every_live_file_in_the_version_of_its_batch(
    tmp_path: Path,
) -> None:
    loc = str(tmp_path / "lake")
    table = DeltaTable.create(loc, SCHEMA)
    for rows in ([1, 2], [3]):
        table.append(pa.table({"id": rows, "data": [f"v{r}" for r in rows]}, schema=SCHEMA))
    before = set(DeltaTable.load(loc).snapshot.files)
    after = pa.table({"id": [9], "data": ["new"]}, schema=SCHEMA)
    adds = write_data_files(loc, after, table.schema, ())
    c = _delta_committer(loc, tmp_path / "state")
    c.process(0, DeltaBatch(tuple(adds), (), truncate=True))
    c.snapshot_state(0)
    c.close()  # killed after staging: the restart commits it, once
    for _ in range(2):
        _delta_committer(loc, tmp_path / "state").close()
    table = DeltaTable.load(loc)
    assert table.version == 3  # two appends, then one version for the batch
    assert set(table.snapshot.files) == {a.path for a in adds}
    assert before <= set(table.snapshot.tombstones)
    assert sorted(r["id"] for r in delta_rs_rows(loc)) == [9]
    assert sorted(r["id"] for r in duckdb_delta_rows(loc)) == [9]
