"""stream_sink.spark.foreach_batch.iceberg with ``deletes="positions"``: a Debezium stream
(inserts, updates, deletes, a primary-key change, re-inserts) upserted and changelogged
through ``foreachBatch`` into v2 and v3 tables. Every snapshot holds no equality delete
file and is read by pyiceberg exactly as by our reader; the final table by DuckDB too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_rows, pyiceberg_table

import stream_sink as ss
from stream_sink.maintenance.inventory import inventory
from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, IcebergSink, from_debezium
from stream_sink.table.manifest import DataFileContent

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("status", pa.string()),
    ]
)
ROW_SCHEMA = "id long, status string"


def _event(op: str, lsn: int, before: int | None, after: int | None, status: str = "") -> dict:
    return {
        "op": op,
        "before": None if before is None else {"id": before, "status": "old"},
        "after": None if after is None else {"id": after, "status": status},
        "source": {"lsn": lsn},
        "ts_ms": 1_700_000_000_000 + lsn,
    }


BATCHES = [
    [_event("c", i, None, i, "new") for i in range(1, 9)],
    [
        _event("u", 10, 1, 1, "paid"),
        _event("d", 11, 2, None),
        _event("d", 12, 3, None),  # a primary-key change 3 -> 30, as Debezium sends it
        _event("c", 13, None, 30, "moved"),
        _event("u", 14, 4, 4, "paid"),
        _event("u", 15, 4, 4, "shipped"),  # twice in one batch
    ],
    [
        _event("c", 20, None, 2, "back"),  # re-insert of a deleted key
        _event("u", 21, 1, 1, "shipped"),
        _event("d", 22, 30, None),
        _event("u", 23, 5, 5, "paid"),
        _event("d", 24, 6, None),
        _event("c", 25, None, 9, "new"),
    ],
]
EXPECTED = [
    (1, "shipped"),
    (2, "back"),
    (4, "shipped"),
    (5, "paid"),
    (7, "new"),
    (8, "new"),
    (9, "new"),
]


def _write(source: Path, batches: list[list[dict]]) -> None:
    source.mkdir(parents=True, exist_ok=True)
    for i, batch in enumerate(batches):
        path = source / f"{i:05d}.json"
        path.write_text("".join(json.dumps(e) + "\n" for e in batch))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source's order


@pytest.mark.parametrize("mode", ["upsert", "changelog"])
@pytest.mark.parametrize("format_version", [2, 3], ids=["v2", "v3"])
def test_a_positions_stream_is_read_exactly_by_pyiceberg_at_every_snapshot(
    spark: Any, tmp_path: Path, format_version: int, mode: str
) -> None:
    catalog = ss.load_catalog("pos", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table(
        "db.t",
        schema=SCHEMA,
        identifier_fields=["id"],
        partition_spec=[("bucket", "id", 4)],
        format_version=format_version,
    )
    _write(tmp_path / "in", BATCHES)
    changes = from_debezium(
        spark.readStream.option("maxFilesPerTrigger", 1).text(str(tmp_path / "in")),
        row_schema=ROW_SCHEMA,
        order_by="source.lsn",
    )
    sink = IcebergSink(
        catalog=catalog,
        table="db.t",
        mode=mode,
        row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN,
        distribution="hash",
        deletes="positions",
        state_dir=str(tmp_path / "state"),
        checkpoint_location=str(tmp_path / "chk"),
    )
    try:
        q = (
            changes.writeStream.foreachBatch(sink.foreach_batch)
            .option("checkpointLocation", sink.spark_checkpoint_location)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
    finally:
        sink.close()
    table = catalog.load_table("db.t")
    snapshots = table.snapshots()
    assert len(snapshots) == len(BATCHES)
    theirs = pyiceberg_table(table.metadata_location)
    for snap in snapshots:
        deletes = inventory(table, snap).deletes
        kinds = {d.data_file.content for d in deletes}
        assert DataFileContent.EQUALITY_DELETES not in kinds, snap.snapshot_id
        ours = table.scan(snapshot_id=snap.snapshot_id).to_arrow()
        got = theirs.scan(snapshot_id=snap.snapshot_id).to_arrow()
        assert _rows(got) == _rows(ours), snap.snapshot_id
    assert _rows(table.scan().to_arrow()) == EXPECTED
    duck = sorted((r["id"], r["status"]) for r in duckdb_rows(table.metadata_location))
    assert duck == EXPECTED
    vectors = {d.data_file.is_deletion_vector for d in inventory(table, snapshots[-1]).deletes}
    assert vectors == {format_version >= 3}


def _rows(t: pa.Table) -> list[tuple[int, str]]:
    return sorted(zip(t["id"].to_pylist(), t["status"].to_pylist(), strict=True))
