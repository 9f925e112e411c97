"""An upsert stream stays exact while the table's partition spec changes under it
(issue 26): once while the query is down, once between two of its micro-batches (by
another catalog instance, as another engine would). Every snapshot is read by our
reader, the last one by DuckDB too. Java changing the spec: tests/interop/
test_spec_change_interop.py; the write and commit logic without Spark:
tests/write/test_spec_change_deletes.py."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
from readers import duckdb_rows
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.spark import IcebergSink
from stream_sink.table.transforms import Bucket

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def test_upsert_stream_is_exact_across_spec_changes_while_down_and_running(
    spark: Any, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "wh")
    catalog = ss.load_catalog("stream", type="hadoop", warehouse=warehouse)
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA, identifier_fields=["id"])
    other = ss.load_catalog("other", type="hadoop", warehouse=warehouse)
    rng, seq = random.Random(3), 0
    batches, expected, after_batch = [], {}, []
    for _ in range(6):
        rows = []
        for _ in range(40):
            seq += 1
            rows.append({"id": rng.randrange(30), "v": f"v{seq}", "seq": seq})
            expected[rows[-1]["id"]] = rows[-1]["v"]
        batches.append(rows)
        after_batch.append(sorted(expected.items()))

    def make_sink() -> IcebergSink:
        return IcebergSink(
            catalog=catalog,
            table="db.t",
            mode="upsert",
            order_by="seq",
            checkpoint_location=str(tmp_path / "chk"),
            state_dir=str(tmp_path / "state"),
        )

    def run(sink: IcebergSink, change_before: int | None = None) -> None:
        def foreach(df: Any, batch_id: int) -> None:
            if batch_id == change_before:  # the query runs: another writer changes the spec
                with other.load_table("db.t").update_spec() as u:
                    u.remove_field("id_bucket_4").add_field("id", Bucket(8), "id_bucket_8")
            sink.foreach_batch(df, batch_id)

        try:
            run_available(
                spark,
                tmp_path / "in",
                "id long, v string, seq long",
                foreach,
                sink.spark_checkpoint_location,
            )
        finally:
            sink.close()

    write_batches(tmp_path / "in", batches[:2])
    run(make_sink())
    with catalog.load_table("db.t").update_spec() as u:  # the query is down
        u.add_field("id", Bucket(4), "id_bucket_4")
    write_batches(tmp_path / "in", batches[2:], first=2)
    run(make_sink(), change_before=4)

    table = catalog.load_table("db.t")
    assert [len(s.fields) for s in table.metadata.partition_specs] == [0, 1, 1]
    snapshots = [s.snapshot_id for s in table.snapshots()]
    assert len(snapshots) == 6
    for snapshot_id, want in zip(snapshots, after_batch, strict=True):
        got = table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()
        assert sorted((r["id"], r["v"]) for r in got) == want
    assert (
        sorted((r["id"], r["v"]) for r in duckdb_rows(table.metadata_location)) == after_batch[-1]
    )
