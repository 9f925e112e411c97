"""What Debezium's PostgreSQL connector really sends, through Kafka and Spark's Kafka
source into the sink: the initial snapshot (op r), inserts, updates, a primary-key update
(a delete, a tombstone and a create), a delete and its tombstone, a column added to the
source table mid-stream (read from the events' Kafka Connect schemas and added to the
table), a TRUNCATE (the table emptied where it happened), and what the sink refuses with
a message naming the cause and the event's Kafka topic, partition and offset: TOAST
placeholders, a source table without a primary key, a malformed event."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from cdc_stack import Connect, Stack
from debezium_pipeline import SINK_OPTIONS, kafka_stream, source_rows, sql, start
from readers import duckdb_rows

import stream_sink as ss
from stream_sink.spark import IcebergSink

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # real JVMs: minutes on a busy machine

PREFIX = "ev"
BIG = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 400))"


@pytest.fixture(scope="module")
def debezium(cdc_stack: Stack) -> Iterator[Connect]:
    """Debezium (JsonConverter with schemas) on the tables ev_*, three rows in the
    snapshot of ev_main."""
    sql(
        cdc_stack.postgres.url,
        "CREATE TABLE ev_main (pk bigint PRIMARY KEY, v text, n bigint)",
        "INSERT INTO ev_main VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
        "CREATE TABLE ev_toast (pk bigint PRIMARY KEY, v text, big text)",
        "ALTER TABLE ev_toast ALTER COLUMN big SET STORAGE EXTERNAL",
        "CREATE TABLE ev_trunc (pk bigint PRIMARY KEY, v text)",
        "CREATE TABLE ev_nokey (pk bigint, v text)",
    )
    connect = Connect(
        cdc_stack.directory / "connect-ev",
        cdc_stack.kafka.jars,
        cdc_stack.kafka,
        cdc_stack.postgres,
        tables=r"public\.ev_.*",
        topic_prefix=PREFIX,
        name="ev",
        schemas=True,
    )
    try:
        yield connect.start()
    finally:
        connect.stop()


def _table(tmp_path: Path, name: str, extra: list[pa.Field] = ()) -> Any:  # type: ignore[assignment]
    catalog = ss.load_catalog("c", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    schema = pa.schema([pa.field("pk", pa.int64(), False), ("v", pa.string()), *extra])
    catalog.create_table(f"db.{name}", schema=schema, identifier_fields=["pk"])
    return catalog


def _run(spark: Any, stack: Stack, catalog: Any, name: str, tmp_path: Path) -> None:
    """One availableNow run of the pipeline from topic ev.public.<name> into db.<name>."""
    sink = IcebergSink(
        catalog=catalog,
        table=f"db.{name}",
        checkpoint_location=str(tmp_path / f"chk-{name}"),
        state_dir=str(tmp_path / "state"),
        schema_evolution="add-columns",
        **SINK_OPTIONS,
    )
    try:
        df = kafka_stream(spark, stack.kafka.bootstrap, f"{PREFIX}.public.{name}")
        start(df, sink).awaitTermination()
    finally:
        sink.close()


def _rows(catalog: Any, name: str, columns: list[str]) -> list[tuple]:
    t = catalog.load_table(f"db.{name}").scan().to_arrow()
    return sorted(zip(*(t.column(c).to_pylist() for c in columns), strict=True))


def _until_equal(spark: Any, stack: Stack, catalog: Any, name: str, tmp_path: Path) -> list:
    """Run the pipeline until the table equals the source table (Debezium is
    asynchronous); the source's rows."""
    deadline = time.monotonic() + 180
    while True:
        _run(spark, stack, catalog, name, tmp_path)
        expected = source_rows(stack.postgres.url, name)
        columns = [f.name for f in catalog.load_table(f"db.{name}").schema().fields]
        if _rows(catalog, name, columns) == expected or time.monotonic() > deadline:
            return expected
        time.sleep(2)


def test_snapshot_changes_key_updates_tombstones_and_an_added_column(
    debezium: Connect, kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    url = cdc_stack.postgres.url
    sql(
        url,
        "INSERT INTO ev_main VALUES (4, 'd', 4)",
        "UPDATE ev_main SET v = 'bb' WHERE pk = 2",
        "UPDATE ev_main SET pk = 30 WHERE pk = 3",  # Debezium: delete 3, tombstone, create 30
        "DELETE FROM ev_main WHERE pk = 1",
        "INSERT INTO ev_main VALUES (1, 'a again', 10)",
        "UPDATE ev_main SET pk = 3 WHERE pk = 30",  # and back: 3 lives again
        "ALTER TABLE ev_main ADD COLUMN extra text",
        "UPDATE ev_main SET extra = 'x' WHERE pk = 4",
        "INSERT INTO ev_main VALUES (5, 'e', 5, 'y')",
    )
    catalog = _table(tmp_path, "ev_main", [pa.field("n", pa.int64())])
    expected = _until_equal(kafka_spark, cdc_stack, catalog, "ev_main", tmp_path)
    assert expected == [
        (1, "a again", 10, None),
        (2, "bb", 2, None),
        (3, "c", 3, None),
        (4, "d", 4, "x"),
        (5, "e", 5, "y"),
    ]
    table = catalog.load_table("db.ev_main")
    assert [f.name for f in table.schema().fields] == ["pk", "v", "n", "extra"]
    assert _rows(catalog, "ev_main", ["pk", "v", "n", "extra"]) == expected

    # the topic held what the docs say Debezium sends
    events = (
        kafka_spark.read.format("kafka")
        .option("kafka.bootstrap.servers", cdc_stack.kafka.bootstrap)
        .option("subscribe", f"{PREFIX}.public.ev_main")
        .load()
        .selectExpr("get_json_object(cast(value as string), '$.payload.op') AS op")
        .collect()
    )
    ops = [r.op for r in events]
    assert ops.count("r") == 3 and ops.count(None) == 3  # snapshot; tombstones
    assert {"c", "u", "d"} <= set(ops)


def _fails(spark: Any, stack: Stack, name: str, tmp_path: Path, *texts: str) -> str:
    from pyspark.errors import StreamingQueryException

    catalog = _table(tmp_path, name, [pa.field("big", pa.string())] if "toast" in name else [])
    deadline = time.monotonic() + 180
    while True:
        try:
            _run(spark, stack, catalog, name, tmp_path)
        except StreamingQueryException as e:
            message = str(e)
            for text in texts:
                assert text in message, message[:3000]
            return message
        assert time.monotonic() < deadline, f"{name}: the stream did not stop"
        time.sleep(2)


def test_toast_placeholder_is_refused_naming_replica_identity_full(
    debezium: Connect, kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    sql(
        cdc_stack.postgres.url,
        f"INSERT INTO ev_toast VALUES (1, 'a', {BIG})",
        "UPDATE ev_toast SET v = 'b' WHERE pk = 1",  # big is unchanged: not sent
    )
    _fails(
        kafka_spark,
        cdc_stack,
        "ev_toast",
        tmp_path,
        "ValidationError",
        "__debezium_unavailable_value",
        "column(s) big",
        "REPLICA IDENTITY FULL",
        f"topic {PREFIX}.public.ev_toast partition 0 offset 1",
    )


def test_truncate_empties_the_table_where_it_happened_exactly_once(
    debezium: Connect, kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    """PostgreSQL's TRUNCATE between changes: what came before it (also in the same
    micro-batch) is gone, what came after it lands; read by ours and DuckDB."""
    url = cdc_stack.postgres.url
    sql(url, "INSERT INTO ev_trunc VALUES (1, 'a'), (2, 'b')")
    catalog = _table(tmp_path, "ev_trunc")
    assert _until_equal(kafka_spark, cdc_stack, catalog, "ev_trunc", tmp_path) == [
        (1, "a"),
        (2, "b"),
    ]
    sql(
        url,
        "UPDATE ev_trunc SET v = 'bb' WHERE pk = 2",
        "TRUNCATE ev_trunc",
        "INSERT INTO ev_trunc VALUES (3, 'c'), (1, 'a again')",
        "UPDATE ev_trunc SET v = 'cc' WHERE pk = 3",
    )
    expected = _until_equal(kafka_spark, cdc_stack, catalog, "ev_trunc", tmp_path)
    assert expected == [(1, "a again"), (3, "cc")]
    table = catalog.load_table("db.ev_trunc")
    assert _rows(catalog, "ev_trunc", ["pk", "v"]) == expected
    assert sorted((r["pk"], r["v"]) for r in duckdb_rows(table.metadata_location)) == expected
    stamps = [
        s.summary["stream-sink.max-committed-checkpoint-id"]
        for s in table.snapshots()
        if "stream-sink.max-committed-checkpoint-id" in s.summary
    ]
    assert len(stamps) == len(set(stamps))  # no batch committed twice
    assert any(int(s.summary.get("deleted-data-files", "0")) for s in table.snapshots())
    ops = [
        r.op
        for r in kafka_spark.read.format("kafka")
        .option("kafka.bootstrap.servers", cdc_stack.kafka.bootstrap)
        .option("subscribe", f"{PREFIX}.public.ev_trunc")
        .load()
        .selectExpr("get_json_object(cast(value as string), '$.payload.op') AS op")
        .collect()
    ]
    assert "t" in ops  # Debezium sent the truncate (skipped.operations=none)


def test_source_table_without_primary_key_is_refused(
    debezium: Connect, kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    sql(cdc_stack.postgres.url, "INSERT INTO ev_nokey VALUES (1, 'a')")
    _fails(
        kafka_spark,
        cdc_stack,
        "ev_nokey",
        tmp_path,
        "ValidationError",
        "no primary key",
        f"topic {PREFIX}.public.ev_nokey partition 0 offset 0",
    )


def test_malformed_event_stops_naming_topic_partition_and_offset(
    kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    good = '{"op": "c", "after": {"pk": 1, "v": "a"}, "source": {"lsn": 1}}'
    cdc_stack.kafka.produce("bad_events", [('{"pk": 1}', good), ('{"pk": 2}', "not json {")])
    catalog = _table(tmp_path, "bad")
    sink = IcebergSink(
        catalog=catalog,
        table="db.bad",
        checkpoint_location=str(tmp_path / "chk-bad"),
        state_dir=str(tmp_path / "state"),
        **SINK_OPTIONS,
    )
    df = kafka_stream(kafka_spark, cdc_stack.kafka.bootstrap, "bad_events")
    with pytest.raises(StreamingQueryException) as e:
        try:
            start(df, sink, row_schema="pk bigint, v string").awaitTermination()
        finally:
            sink.close()
    assert "malformed Debezium event" in str(e.value)
    assert "topic bad_events partition 0 offset 1: not json {" in str(e.value)
    assert catalog.load_table("db.bad").scan().to_arrow().num_rows == 0  # nothing applied


def test_cluster_status_reports_the_running_parts_as_a_user_checks_them(
    debezium: Connect, cdc_stack: Stack, tmp_path: Path
) -> None:
    """``scripts/cluster.sh status``'s checks against the real PostgreSQL, Kafka and
    Debezium of this module (Spark and SeaweedFS are not started here: reported down)."""
    import subprocess
    import sys

    from cdc_stack import REPO, write_env

    deadline = time.monotonic() + 120  # the snapshot's first event creates the topic
    while f"{PREFIX}.public.ev_main" not in cdc_stack.kafka.topics():
        assert time.monotonic() < deadline, "Debezium created no topic for ev_main"
        time.sleep(2)
    write_env(
        tmp_path / "env",
        {
            "POSTGRES_URL": cdc_stack.postgres.url,
            "KAFKA_BOOTSTRAP": cdc_stack.kafka.bootstrap,
            "CONNECT_URL": f"http://127.0.0.1:{debezium.port}",
        },
    )
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "cluster_status.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert rows["postgres"].split()[1] == "up"
    assert "slot stream_sink_ev active, lag" in rows["postgres"], rows["postgres"]
    assert rows["kafka"].split()[1] == "up"
    assert f"{PREFIX}.public.ev_main p0=" in rows["kafka"], rows["kafka"]
    assert rows["debezium"].split()[1] == "up"
    assert "connector ev RUNNING, task 0 RUNNING" in rows["debezium"], rows["debezium"]
    for name in ("spark", "seaweedfs"):
        assert rows[name].split()[1] == "DOWN" and "no " in rows[name], rows[name]
