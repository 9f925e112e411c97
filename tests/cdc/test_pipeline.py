"""The whole pipeline, end to end: PostgreSQL → Debezium (Kafka Connect) → Kafka → Spark's
Kafka source → ``from_debezium`` → the sink, while random inserts, updates (primary-key
changes among them) and deletes run in PostgreSQL. The Iceberg run SIGKILLs the driver
once and restarts Kafka once; at the end the table equals ``SELECT * FROM source ORDER BY
pk``, read by Apache Iceberg Java and DuckDB. The Delta run (no faults) is read by
delta-rs and DuckDB."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from cdc_stack import Connect, Stack
from debezium_pipeline import (
    SINK_OPTIONS,
    Job,
    Workload,
    kafka_stream,
    source_rows,
    sql,
    start,
    wait_until,
)

import stream_sink as ss

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # real JVMs: minutes on a busy machine

ROW_SCHEMA = "pk bigint, v string, n bigint"
MIRROR = pa.schema([pa.field("pk", pa.int64(), False), ("v", pa.string()), ("n", pa.int64())])


@pytest.fixture(scope="module")
def e2e(cdc_stack: Stack) -> Iterator[Connect]:
    """Debezium on tables e2e_*, with JsonConverter without schemas (the row schema is
    given), each table with 30 rows before the snapshot."""
    for t in ("e2e_iceberg", "e2e_delta"):
        sql(
            cdc_stack.postgres.url,
            f"CREATE TABLE {t} (pk bigint PRIMARY KEY, v text, n bigint)",
            f"INSERT INTO {t} SELECT g, 's' || g, g FROM generate_series(1, 30) g",
        )
    connect = Connect(
        cdc_stack.directory / "connect-e2e",
        cdc_stack.kafka.jars,
        cdc_stack.kafka,
        cdc_stack.postgres,
        tables=r"public\.e2e_.*",
        topic_prefix="e2e",
        name="e2e",
        schemas=False,
    )
    try:
        yield connect.start()
    finally:
        connect.stop()


def _as_tuples(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((r["pk"], r["v"], r["n"]) for r in rows)


def test_iceberg_equals_the_source_through_a_driver_kill_and_a_kafka_restart(
    e2e: Connect, kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    from peers.readers import read_with_java
    from readers import duckdb_rows

    url, jars = cdc_stack.postgres.url, kafka_spark.conf.get("spark.jars")
    catalog = ss.load_catalog("job", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.mirror", schema=MIRROR, identifier_fields=["pk"])
    workload = Workload(url, "e2e_iceberg", seed=23)
    topic = e2e.topic("public.e2e_iceberg")

    job = Job(tmp_path, cdc_stack.kafka.bootstrap, topic, "iceberg", jars, ROW_SCHEMA)
    try:
        job.wait_batches(1)
        workload.run(60)
        job.wait_batches(1)
        job.kill()  # the driver, mid-stream
        workload.run(60)
        job = Job(tmp_path, cdc_stack.kafka.bootstrap, topic, "iceberg", jars, ROW_SCHEMA)
        job.wait_batches(1)
        writer = threading.Thread(target=workload.run, args=(80, 0.05))
        writer.start()
        cdc_stack.kafka.restart()  # the broker, while changes flow
        writer.join()
        workload.run(20)

        def caught_up() -> bool:
            rows = catalog.load_table("db.mirror").scan().to_arrow().to_pylist()
            return _as_tuples(rows) == source_rows(url, "e2e_iceberg")

        wait_until(caught_up, 240, "the table did not catch up with the source")
    finally:
        job.stop()
    expected = source_rows(url, "e2e_iceberg")
    assert workload.done >= 300 and len(expected) > 30
    location = catalog.load_table("db.mirror").metadata_location
    assert _as_tuples(duckdb_rows(location)) == expected
    (java,) = read_with_java([location])
    assert _as_tuples(java.to_pylist()) == expected


def test_delta_equals_the_source(
    e2e: Connect, kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    from delta_readers import delta_rs_query_rows, duckdb_delta_rows

    from stream_sink.spark import DeltaSink

    url = cdc_stack.postgres.url
    Workload(url, "e2e_delta", seed=7).run(120)
    topic = e2e.topic("public.e2e_delta")
    path = str(tmp_path / "delta")

    def run_once() -> bool:
        sink = DeltaSink(
            path=path,
            equality_fields=["pk"],
            checkpoint_location=str(tmp_path / "chk"),
            state_dir=str(tmp_path / "state"),
            **SINK_OPTIONS,
        )
        try:
            df = kafka_stream(kafka_spark, cdc_stack.kafka.bootstrap, topic)
            start(df, sink, row_schema=ROW_SCHEMA).awaitTermination()
        finally:
            sink.close()
        return _as_tuples(delta_rs_query_rows(path)) == source_rows(url, "e2e_delta")

    wait_until(run_once, 240, "the Delta table did not catch up with the source")
    expected = source_rows(url, "e2e_delta")
    assert _as_tuples(delta_rs_query_rows(path)) == expected
    assert _as_tuples(duckdb_delta_rows(path)) == expected
