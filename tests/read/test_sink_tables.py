"""Tables written the way the sink writes them (upsert CDC writers, one row delta per
batch): our rows equal a model of the change stream and DuckDB's at every snapshot."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from read_support import assert_same_as_duckdb, hadoop_catalog

from stream_sink.read import IncrementalAppendScan, col
from stream_sink.table.manifest import DataFileContent
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])


def _stream(seed: int, batches: int, per_batch: int) -> list[list[tuple[str, int, str]]]:
    """Change batches of (row kind, id, data): inserts, updates (also of ids changed
    earlier in the same batch) and deletes."""
    rng = random.Random(seed)
    out, next_id, known = [], 0, []
    for b in range(batches):
        batch = []
        for i in range(per_batch):
            roll = rng.random()
            if known and roll < 0.3:
                batch.append(("+U", rng.choice(known), f"u{b}.{i}"))
            elif known and roll < 0.4:
                batch.append(("-D", rng.choice(known), ""))
            else:
                batch.append(("+I", next_id, f"i{b}.{i}"))
                known.append(next_id)
                next_id += 1
        out.append(batch)
    return out


def _apply(state: dict[int, str], batch: list[tuple[str, int, str]]) -> None:
    for kind, key, data in batch:
        if kind == "-D":
            state.pop(key, None)
        else:
            state[key] = data


def _write(table: Any, batch: list[tuple[str, int, str]]) -> Any:
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
    writer = factory.create(partition_id=0, task_id=0)
    writer.write(
        pa.table(
            {
                "_row_kind": [k for k, _, _ in batch],
                "id": pa.array([i for _, i, _ in batch], pa.int64()),
                "data": [d for _, _, d in batch],
            }
        )
    )
    result = writer.complete()
    return commit_write_result(table, result), result


@pytest.mark.parametrize("spec", [[], [("bucket", "id", 4)]], ids=["unpartitioned", "bucketed"])
def test_upsert_stream_reads_back_exactly(tmp_path: Path, spec: list) -> None:
    table = hadoop_catalog(tmp_path).create_table(
        "db.t", schema=SCHEMA, partition_spec=spec, identifier_fields=["id"]
    )
    state: dict[int, str] = {}
    expected: dict[int, dict[int, str]] = {}
    kinds: set[DataFileContent] = set()
    for batch in _stream(seed=len(spec), batches=6, per_batch=40):
        _apply(state, batch)
        snapshot, result = _write(table, batch)
        kinds.update(f.content for f in result.delete_files)
        expected[snapshot.snapshot_id] = dict(state)
    assert kinds == {DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES}
    for snapshot_id, rows in expected.items():
        out = table.scan(snapshot_id=snapshot_id).to_arrow()
        assert (
            dict(zip(out.column("id").to_pylist(), out.column("data").to_pylist(), strict=True))
            == rows
        )
        assert out.num_rows == len(rows)  # no key twice
        assert table.scan(snapshot_id=snapshot_id).count() == len(rows)
    some = sorted(state)[len(state) // 2]
    assert table.scan(row_filter=col("id") == some).to_arrow().to_pylist() == [
        {"id": some, "data": state[some]}
    ]
    assert_same_as_duckdb(table, "id")


def test_incremental_scan_skips_row_deltas_with_deletes(tmp_path: Path) -> None:
    table = hadoop_catalog(tmp_path).create_table("db.t", schema=SCHEMA, identifier_fields=["id"])
    first = table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "data": ["a", "b"]}))
    _write(table, [("+U", 1, "A"), ("+I", 3, "c")])  # an overwrite: data and deletes
    last = table.append(pa.table({"id": pa.array([4], pa.int64()), "data": ["d"]}))
    out = IncrementalAppendScan(table, first.snapshot_id, last.snapshot_id).to_arrow()
    assert out.to_pylist() == [{"id": 4, "data": "d"}]
