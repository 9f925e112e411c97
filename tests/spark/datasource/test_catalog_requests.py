"""What ``format("stream_sink")`` asks of a REST catalog per micro-batch: a few batches of
an append and of an upsert stream into SeaweedFS's REST catalog (OAuth2 client
credentials, vended storage credentials), through a proxy counting the requests by kind
(``tests/counting_proxy.py``). Between two batches another writer partitions the table:
the next batch is written in the new spec. Every row lands exactly once, read back by
ours, and the append stream's by pyiceberg and DuckDB too, through the catalog."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from counting_proxy import CountingProxy
from kill_harness import write_batches

import stream_sink as ss
from stream_sink.spark import register
from stream_sink.spark.datasource.register import supports_data_source

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not supports_data_source(), reason="Spark's Python Data Source API needs pyspark >= 4.0"
    ),
]
TABLE_BUCKET = "warehouse"  # the vending server's table bucket
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("seq", pa.int64())])
BATCHES = 4
LOADS = 7  # loadTables per micro-batch: see the test's docstring
RESPEC_BEFORE = 3  # another writer partitions the table by id before this batch


@pytest.fixture
def proxy(vending_seaweed: Any) -> Iterator[CountingProxy]:
    p = CountingProxy.start(vending_seaweed.catalog_uri)
    yield p
    p.stop()


def _batch(i: int) -> list[dict[str, Any]]:
    """Batch ``i``: keys 2i..2i+2 (one key shared with the next batch), value ``b<i>``."""
    return [{"id": k, "v": f"b{i}", "seq": i * 10 + k} for k in range(2 * i, 2 * i + 3)]


def _expected(mode: str) -> list[int]:
    rows = [r["id"] for i in range(BATCHES) for r in _batch(i)]
    return sorted(set(rows)) if mode == "upsert" else sorted(rows)


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_each_micro_batch_asks_the_catalog_only_what_it_needs(
    spark: Any, tmp_path: Path, vending_seaweed: Any, proxy: CountingProxy, mode: str
) -> None:
    """Per micro-batch after the first: no ``/v1/config`` and no token request (each
    Python worker on the driver keeps one catalog client per catalog configuration; the
    token is renewed only when due, and the run is far shorter than its lifetime), and
    one commit, and at most ``LOADS`` (7) ``loadTable``s, nothing else: Spark asks for
    the writer about four times per batch (each loads the table, so every batch is
    planned on its current schema, spec and vended credentials) and the commit loads it
    for the commit. Before clients were kept per worker process a batch cost 17: 3
    config, 6 token, 7 loadTable, 1 commit. Read back: ours; for the append stream
    pyiceberg and DuckDB too (pyiceberg reads no equality deletes yet)."""
    props = vending_seaweed.oauth_rest_props(TABLE_BUCKET)
    catalog = ss.load_catalog("vend", type="rest", **props)
    ns = f"ns{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(ns)
    name = f"{ns}.events"
    catalog.create_table(name, SCHEMA, identifier_fields=["id"] if mode == "upsert" else None)
    source = tmp_path / "in"
    source.mkdir()

    register(spark)
    df = spark.readStream.schema("id long, v string, seq long").option("maxFilesPerTrigger", 1)
    df = df.json(str(source))
    if mode == "upsert":
        df = df.repartition("id")
    writer = df.writeStream.format("stream_sink").option("table", name).option("mode", mode)
    if mode == "upsert":
        writer = writer.option("order-by", "seq")
    for key, value in {**props, "uri": proxy.uri, "type": "rest"}.items():
        writer = writer.option(f"catalog.{key}", value)
    query = (
        writer.option("state-dir", str(tmp_path / "state"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .start()
    )
    per_batch: list[Counter[str]] = []
    try:
        for i in range(BATCHES):
            if i == RESPEC_BEFORE:
                with catalog.load_table(name).update_spec() as u:
                    u.add_identity("id")
            before = proxy.counts()
            write_batches(source, [_batch(i)], first=i)
            query.processAllAvailable()
            per_batch.append(proxy.counts() - before)
    finally:
        query.stop()
    print(f"\n{mode}: requests per micro-batch: {[dict(c) for c in per_batch]}")
    if os.environ.get("STREAM_SINK_MEASURE_ONLY"):
        return

    for i, got in enumerate(per_batch[1:], start=1):
        assert got["config"] == 0 and got["token"] == 0, (i, got)
        assert got["commit"] == 1 and got["loadTable"] <= LOADS, (i, got)
        assert sum(got.values()) == got["commit"] + got["loadTable"], (i, got)

    want = _expected(mode)
    table = catalog.load_table(name)
    marks = [s.summary["stream-sink.max-committed-checkpoint-id"] for s in table.snapshots()]
    assert marks == [str(i) for i in range(BATCHES)]  # one commit per batch, none twice
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == want

    if mode == "append":  # pyiceberg reads no equality deletes yet
        from readers import rest_catalog_ids

        assert rest_catalog_ids(vending_seaweed, TABLE_BUCKET, ns, "events") == (want, want)
    # the batch after the spec change was planned on the table as it was then
    respecced = _data_file_specs(vending_seaweed, ns, "events")
    late = {(1, r["id"]) for i in range(RESPEC_BEFORE, BATCHES) for r in _batch(i)}
    assert respecced == {(0, None)} | late


def _data_file_specs(server: Any, ns: str, table: str) -> set[tuple[int, int | None]]:
    """(spec id, partition value of ``id``) of the live data files, as pyiceberg lists them."""
    from pyiceberg.catalog import load_catalog as py_load_catalog

    props = dict(server.rest_props(TABLE_BUCKET))
    props["client.access-key-id"] = server.access_key
    props["client.secret-access-key"] = server.secret_key
    files = py_load_catalog("py", **props).load_table((ns, table)).inspect.files().to_pylist()
    return {(f["spec_id"], (f["partition"] or {}).get("id")) for f in files if f["content"] == 0}
