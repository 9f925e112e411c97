"""PostgreSQL's types through Debezium (``decimal.handling.mode=precise``, Connect
schemas), Kafka and Spark's Kafka source into tables the sinks create from the first
batch: each column typed as the source has it (docs/debezium.md's table), every value
equal to PostgreSQL's, read the same by ours, DuckDB and Apache Iceberg Java, and by
delta-rs for the Delta table."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from cdc_stack import Connect, Stack
from debezium_pipeline import kafka_stream, source_rows, sql
from delta_readers import delta_rs_rows
from peers.readers import read_with_java
from readers import duckdb_rows

import stream_sink as ss
from stream_sink.delta import DeltaTable
from stream_sink.exceptions import NoSuchTableError
from stream_sink.spark import (
    ORDER_COLUMN,
    ROW_KIND_COLUMN,
    DeltaSink,
    IcebergSink,
    debezium_row_schema,
    from_debezium,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

PREFIX = "ty"
COLUMNS = (
    "pk bigint PRIMARY KEY, n20 numeric(20,4), nv numeric, d date, t time, ts timestamp, "
    "tstz timestamptz, j jsonb, u uuid, b boolean, by bytea, tx text, r real, "
    "dp double precision, si smallint, i integer, iv interval"
)
ROWS = [
    "(1, 12345678901234.5678, 123456.789, '2024-02-29', '13:45:30.123456', "
    "'2024-01-02 10:00:00.123456', '2024-01-02 10:00:00.5+02', '{\"a\": [1, 2]}', "
    "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, '\\xdeadbeef', 'zürich ☃', 1.5, 2.25, "
    "-7, 42, '1 day 2 hours')",
    "(2, -0.0001, -0.000000000000000001, '1969-07-20', '00:00:00', '1965-05-05 05:05:05', "
    "'1965-05-05 05:05:05+00', '[]', '00000000-0000-0000-0000-000000000000', false, "
    "'\\x00', '', -0.5, -1e300, 32767, -2147483648, '-3 minutes')",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL)",
]
TYPES = {  # the Iceberg type of each column of a table the sink creates
    "pk": "long",
    "n20": "decimal(20, 4)",
    "nv": "decimal(38, 18)",
    "d": "date",
    "t": "long",
    "ts": "timestamp",
    "tstz": "timestamptz",
    "j": "string",
    "u": "string",
    "b": "boolean",
    "by": "binary",
    "tx": "string",
    "r": "float",
    "dp": "double",
    "si": "int",
    "i": "int",
    "iv": "long",
}
UTC = datetime.timezone.utc


@pytest.fixture(scope="module")
def debezium(cdc_stack: Stack) -> Iterator[Connect]:
    """Debezium with precise decimals on table ty_all: two rows and one of nulls in its
    snapshot, an update and a delete (with its tombstone) after it."""
    sql(cdc_stack.postgres.url, f"CREATE TABLE ty_all ({COLUMNS})")
    sql(cdc_stack.postgres.url, f"INSERT INTO ty_all VALUES {', '.join(ROWS)}")
    connect = Connect(
        cdc_stack.directory / "connect-ty",
        cdc_stack.kafka.jars,
        cdc_stack.kafka,
        cdc_stack.postgres,
        tables=r"public\.ty_all",
        topic_prefix=PREFIX,
        name="ty",
        schemas=True,
        overrides={"decimal.handling.mode": "precise"},
    )
    try:
        yield connect.start()
    finally:
        connect.stop()


def expected(url: str) -> list[dict[str, Any]]:
    """PostgreSQL's rows as the tables hold them: a time as microseconds since midnight,
    an interval as Debezium's microseconds, jsonb and uuid as PostgreSQL prints them."""
    text = "j::text AS j, u::text AS u, extract(epoch FROM iv)::numeric * 1000000 AS iv"
    rows = []
    for r in source_rows(
        url, "ty_all", f"pk, n20, nv, d, t, ts, tstz, {text}, b, by, tx, r, dp, si, i"
    ):
        pk, n20, nv, d, t, ts, tstz, j, u, iv, b, by, tx, r, dp, si, i = r
        micros = (
            None
            if t is None
            else ((t.hour * 60 + t.minute) * 60 + t.second) * 10**6 + t.microsecond
        )
        rows.append(
            {
                "pk": pk, "n20": n20, "nv": None if nv is None else nv.quantize(Decimal(10) ** -18),
                "d": d, "t": micros, "ts": ts, "tstz": tstz, "j": j, "u": u, "b": b,
                "by": None if by is None else bytes(by), "tx": tx, "r": r, "dp": dp,
                "si": si, "i": i, "iv": None if iv is None else int(iv),
            }
        )  # fmt: skip
    return rows


def apply_to(sink: Any) -> Any:
    """docs/debezium.md's foreachBatch function, routed: the table is named by the event."""

    def apply(batch: Any, batch_id: int) -> None:
        changes = from_debezium(
            batch, row_schema=debezium_row_schema(batch), table_column="_table", key_column="key"
        )
        sink.foreach_batch(changes, batch_id)

    return apply


def run(spark: Any, stack: Stack, sink: Any) -> None:
    df = kafka_stream(spark, stack.kafka.bootstrap, f"{PREFIX}.public.ty_all")
    query = (
        df.writeStream.foreachBatch(apply_to(sink))
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        sink.close()


def ours(rows: pa.Table) -> list[dict[str, Any]]:
    out = sorted(rows.select(list(TYPES)).to_pylist(), key=lambda r: r["pk"])
    for r in out:
        if r["ts"] is not None and r["ts"].tzinfo is not None:
            r["ts"] = r["ts"].replace(tzinfo=None)
    return out


def test_source_types_survive_into_a_created_iceberg_table_read_by_every_reader(
    debezium: Connect, kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    url = cdc_stack.postgres.url
    catalog = ss.load_catalog("c", type="hadoop", warehouse=str(tmp_path / "wh"))
    sink = IcebergSink(
        catalog=catalog,
        table_column="_table",
        namespaces=["public"],
        create_tables=True,
        mode="upsert",
        row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN,
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    sql(
        url,
        "UPDATE ty_all SET n20 = 0.5, tx = 'changed' WHERE pk = 2",
        "DELETE FROM ty_all WHERE pk = 3",
    )
    want = expected(url)
    deadline = time.monotonic() + 180
    while True:  # Debezium is asynchronous: run until its changes have arrived
        run(kafka_spark, cdc_stack, sink)
        try:
            table = catalog.load_table("public.ty_all")  # named <schema>.<table>
        except NoSuchTableError:  # no change of ty_all has reached Kafka yet
            assert time.monotonic() < deadline, "Debezium sent no change of ty_all in 180 s"
            time.sleep(2)
            continue
        got = ours(table.scan().to_arrow())
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert {f.name: str(f.field_type) for f in table.schema().fields} == TYPES
    assert got == want
    location = table.metadata_location
    duck = sorted(duckdb_rows(location), key=lambda r: r["pk"])
    assert [_plain(r) for r in duck] == [_plain(r) for r in want]
    (java,) = read_with_java([location])
    assert [_plain(r) for r in ours_java(java)] == [_plain(r) for r in want]


def test_source_types_survive_into_a_created_delta_table(
    debezium: Connect, kafka_spark: Any, cdc_stack: Stack, tmp_path: Path
) -> None:
    lake = str(tmp_path / "lake")
    sink = DeltaSink(
        path=lake,
        mode="upsert",
        equality_fields=["pk"],
        row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN,
        checkpoint_location=str(tmp_path / "chk-delta"),
        state_dir=str(tmp_path / "state"),
    )
    want = expected(cdc_stack.postgres.url)
    deadline = time.monotonic() + 180
    while True:
        run(kafka_spark, cdc_stack, _unrouted(sink))
        if not (Path(lake) / "_delta_log").exists():  # no change has reached Kafka yet
            assert time.monotonic() < deadline, "Debezium sent no change of ty_all in 180 s"
            time.sleep(2)
            continue
        got = ours(DeltaTable.load(lake).to_arrow())
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(2)
    schema = DeltaTable.load(lake).schema
    assert schema.field("n20").type == pa.decimal128(20, 4)
    assert schema.field("d").type == pa.date32() and schema.field("tstz").type.tz is not None
    assert got == want
    assert [_plain(r) for r in sorted(delta_rs_rows(lake), key=lambda r: r["pk"])] == [
        _plain(r) for r in want
    ]


class _unrouted:
    """``sink`` fed without the routing column (a DeltaSink writes one table)."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.spark_checkpoint_location = sink.spark_checkpoint_location

    def foreach_batch(self, df: Any, batch_id: int) -> None:
        self.sink.foreach_batch(df.drop("_table"), batch_id)

    def close(self) -> None:
        self.sink.close()


def ours_java(java: pa.Table) -> list[dict[str, Any]]:
    return sorted(java.select(list(TYPES)).to_pylist(), key=lambda r: r["pk"])


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row comparable across readers: instants in UTC without their zone object,
    naive timestamps as they are, floats of a float column to float32 precision."""
    out = {}
    for k, v in row.items():
        if isinstance(v, datetime.datetime) and v.tzinfo is not None:
            v = v.astimezone(UTC).replace(tzinfo=None)
        if k == "r" and v is not None:
            v = float(pa.scalar(v, pa.float32()).as_py())
        if isinstance(v, (bytearray, memoryview)):
            v = bytes(v)
        out[k] = v
    return out
