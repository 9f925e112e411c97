"""Faults of the CDC pipeline's parts: Kafka Connect killed after Debezium sent changes
past its stored offset sends them again at the same LSNs (duplicates upstream, none in
the table), offsets Spark still needs dropped by Kafka's retention stop the query
(``failOnDataLoss``, Spark's default), and a quiet table's replication slot keeps no
WAL of other tables' changes (the connector template's heartbeat)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from cdc_stack import Connect, Stack
from debezium_pipeline import (
    SINK_OPTIONS,
    Workload,
    kafka_stream,
    source_rows,
    sql,
    start,
    wait_until,
)

import stream_sink as ss
from stream_sink.spark import IcebergSink

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # real JVMs: minutes on a busy machine

ROW_SCHEMA = "pk bigint, v string, n bigint"
MIRROR = pa.schema([pa.field("pk", pa.int64(), False), ("v", pa.string()), ("n", pa.int64())])


def _catalog(tmp_path: Path) -> Any:
    catalog = ss.load_catalog("f", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    catalog.create_table("db.mirror", schema=MIRROR, identifier_fields=["pk"])
    return catalog


def _run(
    spark: Any, bootstrap: str, topic: str, catalog: Any, tmp_path: Path, **kafka: str
) -> None:
    sink = IcebergSink(
        catalog=catalog,
        table="db.mirror",
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
        **SINK_OPTIONS,
    )
    try:
        df = kafka_stream(spark, bootstrap, topic, **kafka)
        start(df, sink, row_schema=ROW_SCHEMA).awaitTermination()
    finally:
        sink.close()


def _connector(cdc_stack: Stack, name: str, table: str, **options: Any) -> Connect:
    """Debezium (not started) on ``public.<table>``, named, slotted and prefixing its
    topics with ``name``, in a directory of its own."""
    return Connect(
        cdc_stack.directory / f"connect-{name}",
        cdc_stack.kafka.jars,
        cdc_stack.kafka,
        cdc_stack.postgres,
        tables=f"public.{table}",
        topic_prefix=name,
        name=name,
        **options,
    )


def _table_rows(catalog: Any) -> list[tuple]:
    t = catalog.load_table("db.mirror").scan().to_arrow()
    return sorted(zip(*(t.column(c).to_pylist() for c in ("pk", "v", "n")), strict=True))


def _catch_up(spark: Any, stack: Stack, topic: str, catalog: Any, tmp_path: Path) -> None:
    deadline = time.monotonic() + 240
    while True:
        _run(spark, stack.kafka.bootstrap, topic, catalog, tmp_path)
        if _table_rows(catalog) == source_rows(stack.postgres.url, "flt_replay"):
            return
        assert time.monotonic() < deadline, "the table did not catch up with the source"
        time.sleep(2)


NEVER_FLUSHED_MS = 3_600_000
"""An ``offset.flush.interval.ms`` no run of the test reaches: nothing Debezium sends is
stored as its offset until Kafka Connect stops gracefully."""
Change = tuple[str, str, str]
"""A change event as (``source.lsn``, ``op``, Kafka key)."""


def _changes(spark: Any, bootstrap: str, topic: str) -> list[tuple[int, Change]]:
    """Every change event of ``topic`` (tombstones left out) with its offset, in order."""
    rows = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .where("value IS NOT NULL")
        .selectExpr(
            "offset",
            "get_json_object(cast(value AS string), '$.source.lsn') AS lsn",
            "get_json_object(cast(value AS string), '$.op') AS op",
            "cast(key AS string) AS key",
        )
        .orderBy("offset")
        .collect()
    )
    return [(r["offset"], (r["lsn"], r["op"], r["key"])) for r in rows]


def _end_offset(spark: Any, bootstrap: str, topic: str) -> int:
    """The topic's end offset (one partition): every message it holds, tombstones too."""
    return int(
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .count()
    )


def test_debezium_killed_past_its_stored_offset_sends_again_and_the_table_equals_the_source(
    kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    """Kafka Connect stores Debezium's source offset every ``offset.flush.interval.ms``
    only. With none stored while 30 transactions stream (an interval longer than the
    test), Kafka Connect is killed (SIGKILL) once the table holds them: restarted, Debezium
    sends every change after its stored offset again, at the same LSNs, and the sink,
    which applied the first copies, applies them again in later micro-batches with the
    changes made after the restart: the table equals the source."""
    url, bootstrap = cdc_stack.postgres.url, cdc_stack.kafka.bootstrap
    sql(
        url,
        "CREATE TABLE flt_replay (pk bigint PRIMARY KEY, v text, n bigint)",
        "INSERT INTO flt_replay SELECT g, 's' || g, g FROM generate_series(1, 20) g",
    )
    connect = _connector(cdc_stack, "flt", "flt_replay", schemas=False)
    topic = connect.topic("public.flt_replay")
    catalog = _catalog(tmp_path)
    workload = Workload(url, "flt_replay", seed=5)
    try:
        connect.start()
        workload.run(30)
        _catch_up(kafka_spark, cdc_stack, topic, catalog, tmp_path)
        connect.stop()  # graceful: the offset of the last change sent is stored
        stored = _end_offset(kafka_spark, bootstrap, topic)
        connect.flush_ms = NEVER_FLUSHED_MS
        connect.start()
        workload.run(30)
        _catch_up(kafka_spark, cdc_stack, topic, catalog, tmp_path)  # the sink applied them
        sent = _end_offset(kafka_spark, bootstrap, topic)
        connect.stop(signal.SIGKILL)
        connect.flush_ms = 1000
        connect.start()
        past = {c for o, c in _changes(kafka_spark, bootstrap, topic) if stored <= o < sent}

        def sent_again() -> bool:
            again = {c for o, c in _changes(kafka_spark, bootstrap, topic) if o >= sent}
            return past <= again

        wait_until(sent_again, 240, "Debezium did not send the unstored changes again")
        workload.run(10)
        _catch_up(kafka_spark, cdc_stack, topic, catalog, tmp_path)
    finally:
        connect.stop()
    changes = _changes(kafka_spark, bootstrap, topic)
    # duplicates upstream: every change past the stored offset is in the topic twice
    duplicates = len(changes) - len({c for _, c in changes})
    assert duplicates >= len(past) >= 30, (duplicates, len(past))
    # it resumed from its stored offset (no second snapshot)
    assert sum(1 for _, (_, op, _) in changes if op == "r") == 20
    rows = _table_rows(catalog)
    assert len({r[0] for r in rows}) == len(rows)
    assert rows == source_rows(url, "flt_replay")


def _event(pk: int, lsn: int) -> tuple[str, str]:
    value = {"op": "c", "after": {"pk": pk, "v": f"v{pk}", "n": lsn}, "source": {"lsn": lsn}}
    return json.dumps({"pk": pk}), json.dumps(value)


def test_offsets_dropped_by_retention_stop_the_query_naming_failondataloss(
    kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    kafka, topic = cdc_stack.kafka, "retention_loss"
    catalog = _catalog(tmp_path)
    kafka.produce(topic, [_event(pk, pk) for pk in (1, 2, 3)])
    _run(kafka_spark, kafka.bootstrap, topic, catalog, tmp_path)
    assert [r[0] for r in _table_rows(catalog)] == [1, 2, 3]

    kafka.produce(topic, [_event(pk, pk) for pk in (4, 5, 6)])
    kafka.delete_records_before(topic, 5)  # offsets 3 and 4 (pk 4, 5) are gone
    with pytest.raises(StreamingQueryException, match="failOnDataLoss"):
        _run(kafka_spark, kafka.bootstrap, topic, catalog, tmp_path)
    assert [r[0] for r in _table_rows(catalog)] == [1, 2, 3]  # nothing of the gap applied

    # knowingly going on: the table misses what retention dropped
    _run(kafka_spark, kafka.bootstrap, topic, catalog, tmp_path, failOnDataLoss="false")
    assert [r[0] for r in _table_rows(catalog)] == [1, 2, 3, 6]


BUSY_MB = 30
"""WAL the other table's writes make (about), far above what the slot may keep."""
KEPT_MB = 1


def _kept_bytes(cdc_stack: Stack, slot: str) -> int:
    """WAL written since the slot's confirmed position (what PostgreSQL must keep)."""
    with cdc_stack.postgres.connect() as conn:
        row = conn.execute(
            "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (slot,),
        ).fetchone()
    assert row is not None, f"no replication slot {slot}"
    return int(row[0])


def test_a_quiet_tables_slot_keeps_no_wal_of_other_tables(cdc_stack: Stack) -> None:
    """The connector as its template (``docker/cdc/debezium-postgres.properties``) sets
    it up, on a table nothing changes while another table is written: within a few
    heartbeats its slot confirms the WAL's head, so PostgreSQL can remove that WAL."""
    url = cdc_stack.postgres.url
    sql(
        url,
        "CREATE TABLE slot_quiet (pk bigint PRIMARY KEY, v text)",
        "INSERT INTO slot_quiet VALUES (1, 'a')",
        "CREATE TABLE slot_busy (pk bigserial PRIMARY KEY, v text)",
    )
    connect = _connector(cdc_stack, "slot", "slot_quiet")
    slot = connect.connector_values()["SLOT_NAME"]
    assert isinstance(slot, str)
    try:
        connect.start()
        rows = BUSY_MB * 1024 * 1024 // 300  # a row takes about 300 bytes of WAL
        sql(
            url,
            f"INSERT INTO slot_busy (v) SELECT repeat('x', 200) FROM generate_series(1, {rows})",
        )
        assert _kept_bytes(cdc_stack, slot) > BUSY_MB // 2 * 1024 * 1024
        deadline = time.monotonic() + 90  # heartbeats every 10 s, offsets stored every 1 s
        kept = [_kept_bytes(cdc_stack, slot)]
        while kept[-1] >= KEPT_MB * 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(2)
            kept.append(_kept_bytes(cdc_stack, slot))
        assert kept[-1] < KEPT_MB * 1024 * 1024, f"the slot keeps WAL (bytes, every 2 s): {kept}"
    finally:
        connect.stop()
    assert "slot.message" not in cdc_stack.kafka.topics()  # the heartbeat's message
