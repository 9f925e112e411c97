"""An append stream into a REST table whose catalog vends credentials that expire after
``VENDED_LIFETIME_S`` (``vending_seaweed``), outliving them: one micro-batch is held up
in its executor past the lifetime of the credentials it was handed, so S3 refuses its
writes mid-batch; the sink renews them and writes the batch again. The same through
``format("stream_sink")`` with the catalog authenticated by an OAuth2 token: the
executor holding the batch renews the credentials itself, and the query goes on. Every
row lands exactly once, read back by ours, pyiceberg and DuckDB through the same
catalog."""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from seaweed_server import VENDED_LIFETIME_S
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.spark import IcebergSink, register
from stream_sink.spark.datasource.register import supports_data_source

TABLE_BUCKET = "warehouse"  # the vending server's table bucket
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
HELD_UP = 7  # the row whose batch is held up in its executor


def held_up_once(marker: Path, seconds: float) -> Any:
    """A Spark UDF passing ``id`` through that, the first time it sees ``HELD_UP``, waits
    ``seconds`` (the executor's credentials expire meanwhile)."""
    from pyspark.sql.functions import udf

    def identity(value):  # type: ignore[no-untyped-def]  # untyped: a plain Python UDF
        if value == HELD_UP and not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(seconds)
        return value

    return udf(identity, "long")


def prepare(catalog: Any, tmp_path: Path) -> tuple[str, str, Any]:
    """A new namespace with an ``events`` table, four batches of three rows as input
    files under ``tmp_path/in``, and the UDF holding the batch of ``HELD_UP`` up past the
    credentials' lifetime: (namespace, table name, UDF)."""
    ns = f"ns{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(ns)
    name = f"{ns}.events"
    catalog.create_table(name, SCHEMA)
    batches = [[{"id": i * 3 + j, "v": f"b{i}"} for j in range(3)] for i in range(4)]
    write_batches(tmp_path / "in", batches)
    return ns, name, held_up_once(tmp_path / "held-up", VENDED_LIFETIME_S + 1)


def assert_exactly_once(catalog: Any, vending_seaweed: Any, ns: str, tmp_path: Path) -> None:
    """The batch was held up, and every row landed once, in one snapshot per batch, as
    ours, pyiceberg and DuckDB read the table through the catalog."""
    from readers import rest_catalog_ids

    assert os.path.exists(tmp_path / "held-up")
    want = list(range(12))
    table = catalog.load_table(f"{ns}.events")
    assert len(table.snapshots()) == 4  # one per batch, none twice
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == want
    assert rest_catalog_ids(vending_seaweed, TABLE_BUCKET, ns, "events") == (want, want)


@pytest.mark.slow
def test_an_append_stream_outlives_its_vended_credentials(
    spark: Any, tmp_path: Path, vending_seaweed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    catalog = ss.load_catalog("vend", type="rest", **vending_seaweed.rest_props(TABLE_BUCKET))
    ns, name, slow = prepare(catalog, tmp_path)
    sink = IcebergSink(
        catalog=catalog,
        table=name,
        mode="append",
        checkpoint_location=str(tmp_path / "chk"),
        spark_checkpoint_location=str(tmp_path / "spark-chk"),
        state_dir=str(tmp_path / "state"),
    )

    def foreach(df: Any, batch_id: int) -> None:
        sink.foreach_batch(df.withColumn("id", slow("id")), batch_id)

    try:
        schema = "id long, v string"
        run_available(spark, tmp_path / "in", schema, foreach, sink.spark_checkpoint_location)
    finally:
        sink.close()

    assert os.path.exists(tmp_path / "held-up")
    refused = [
        r for r in caplog.records if "refused the executors' storage credentials" in r.message
    ]
    assert len(refused) == 1  # batch 2, written again with renewed credentials

    # no vended credential in the logs or in anything the run left on disk: SeaweedFS's
    # session tokens are JWTs, its temporary access keys start with ASIA
    leaked = re.compile(rb"eyJhbGciOi|ASIA[0-9a-f]{16}")
    assert not leaked.search(caplog.text.encode())
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert not leaked.search(path.read_bytes()), path

    assert_exactly_once(catalog, vending_seaweed, ns, tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(
    not supports_data_source(), reason="Spark's Python Data Source API needs pyspark >= 4.0"
)
def test_a_data_source_stream_renews_vended_credentials_in_its_executors(
    spark: Any, tmp_path: Path, vending_seaweed: Any
) -> None:
    props = vending_seaweed.oauth_rest_props(TABLE_BUCKET)
    catalog = ss.load_catalog("vend", type="rest", **props)
    ns, name, slow = prepare(catalog, tmp_path)

    register(spark)
    df = spark.readStream.schema("id long, v string").option("maxFilesPerTrigger", 1)
    df = df.json(str(tmp_path / "in")).withColumn("id", slow("id"))
    writer = df.writeStream.format("stream_sink").option("table", name)
    for key, value in {**props, "type": "rest"}.items():
        writer = writer.option(f"catalog.{key}", value)
    query = (
        writer.option("state-dir", str(tmp_path / "state"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()  # raises when a batch failed

    assert_exactly_once(catalog, vending_seaweed, ns, tmp_path)
