"""``commit_mode="pipelined"`` through Spark: each micro-batch returns once its files are
staged, its table commit runs while the next batch writes, and ``close()`` leaves every
batch committed. Append and upsert into Iceberg (one table, and routed to two) and into
Delta, read back by DuckDB and Java Iceberg, or by delta-rs and DuckDB; each commit
stamped with its own batch, as the synchronous commit stamps it. The option's refusals
on the Data Source routes: ``tests/spark/test_options.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from delta_readers import delta_rs_rows, duckdb_delta_rows
from kill_harness import append_batches, iceberg_marks, upsert_batches
from peers.readers import java_available, read_with_java
from readers import duckdb_rows
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.delta import DeltaTable
from stream_sink.spark import DeltaSink, IcebergSink

APPEND, UPSERT = "id long, data string", "id long, data string, seq long"
FILES = 4


def last_values(batches: list[list[dict[str, Any]]]) -> list[tuple[int, str]]:
    latest: dict[int, str] = {}
    for batch in batches:
        for r in batch:
            latest[r["id"]] = r["data"]
    return sorted(latest.items())


def run(spark: Any, sink: Any, source: Path, schema: str) -> None:
    try:
        run_available(spark, source, schema, sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()


def test_iceberg_append_and_upsert_pipelined(spark: Any, tmp_path: Path) -> None:
    appends = append_batches(FILES, 20)
    upserts, _ = upsert_batches(FILES, per_file=10, keys=8, seed=7)
    write_batches(tmp_path / "append-in", appends)
    write_batches(tmp_path / "upsert-in", upserts)
    catalog = ss.load_catalog("p", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())])
    catalog.create_table("db.events", schema=schema)
    catalog.create_table("db.latest", schema=schema, identifier_fields=["id"])
    common: dict[str, Any] = {
        "catalog": catalog,
        "state_dir": str(tmp_path / "state"),
        "commit_mode": "pipelined",
    }
    events = IcebergSink(table="db.events", checkpoint_location=str(tmp_path / "c1"), **common)
    run(spark, events, tmp_path / "append-in", APPEND)
    latest = IcebergSink(
        table="db.latest",
        mode="upsert",
        order_by="seq",
        checkpoint_location=str(tmp_path / "c2"),
        **common,
    )
    run(spark, latest, tmp_path / "upsert-in", UPSERT)
    assert latest.metrics_snapshot().committer is not None
    assert latest.metrics_snapshot().committer.commits_in_flight == 0

    tables = [catalog.load_table("db.events"), catalog.load_table("db.latest")]
    for table in tables:  # one commit per batch, each stamped with its own batch
        assert iceberg_marks(table) == list(range(FILES))
    want_ids = sorted(r["id"] for b in appends for r in b)
    want_latest = last_values(upserts)
    assert sorted(r["id"] for r in duckdb_rows(tables[0].metadata_location)) == want_ids
    got = sorted((r["id"], r["data"]) for r in duckdb_rows(tables[1].metadata_location))
    assert got == want_latest
    if java_available():
        java_events, java_latest = read_with_java([t.metadata_location for t in tables])
        assert sorted(java_events.column("id").to_pylist()) == want_ids
        ids, values = java_latest.column("id"), java_latest.column("data")
        pairs = zip(ids.to_pylist(), values.to_pylist(), strict=True)
        assert sorted(pairs) == want_latest


def test_routed_sink_pipelined_commits_each_table(spark: Any, tmp_path: Path) -> None:
    batches = [
        [{"id": b * 10 + i, "data": f"d{b}", "t": f"db.t{i % 2}"} for i in range(6)]
        for b in range(3)
    ]
    write_batches(tmp_path / "in", batches)
    catalog = ss.load_catalog("p", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    sink = IcebergSink(
        catalog=catalog,
        table_column="t",
        namespaces=["db"],
        create_tables=True,
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
        commit_mode="pipelined",
    )
    run(spark, sink, tmp_path / "in", "id long, data string, t string")
    for name in ("db.t0", "db.t1"):
        table = catalog.load_table(name)
        assert iceberg_marks(table) == [0, 1, 2]
        want = sorted(r["id"] for b in batches for r in b if r["t"] == name)
        assert sorted(r["id"] for r in duckdb_rows(table.metadata_location)) == want


def test_delta_append_and_upsert_pipelined(spark: Any, tmp_path: Path) -> None:
    appends = append_batches(FILES, 20)
    upserts, _ = upsert_batches(FILES, per_file=10, keys=8, seed=9)
    write_batches(tmp_path / "append-in", appends)
    write_batches(tmp_path / "upsert-in", upserts)
    common: dict[str, Any] = {"state_dir": str(tmp_path / "state"), "commit_mode": "pipelined"}
    run(
        spark,
        DeltaSink(
            path=str(tmp_path / "lake" / "events"),
            checkpoint_location=str(tmp_path / "c1"),
            **common,
        ),
        tmp_path / "append-in",
        APPEND,
    )
    run(
        spark,
        DeltaSink(
            path=str(tmp_path / "lake" / "latest"),
            mode="upsert",
            equality_fields=["id"],
            order_by="seq",
            checkpoint_location=str(tmp_path / "c2"),
            **common,
        ),
        tmp_path / "upsert-in",
        UPSERT,
    )
    events = DeltaTable.load(str(tmp_path / "lake" / "events"))
    latest = DeltaTable.load(str(tmp_path / "lake" / "latest"))
    for table in (events, latest):  # one version per batch, its txn naming the batch
        (app,) = table.snapshot.txns
        marks = [table.snapshot_at(v).txn_version(app) for v in range(1, table.version + 1)]
        assert marks == list(range(FILES))
    want_ids = sorted(r["id"] for b in appends for r in b)
    for rows in (delta_rs_rows(events.location), duckdb_delta_rows(events.location)):
        assert sorted(r["id"] for r in rows) == want_ids
    for rows in (delta_rs_rows(latest.location), duckdb_delta_rows(latest.location)):
        assert sorted((r["id"], r["data"]) for r in rows) == last_values(upserts)
