"""``format("stream_sink")`` into a table of a REST catalog (SeaweedFS's, tables on its S3),
the catalog given as ``catalog.*`` options: an upsert stream exactly once across a
restart, every key's last value read back through the same catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from streams import write_batches

from stream_sink.spark import register
from stream_sink.spark.datasource.register import supports_data_source

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(
        not supports_data_source(), reason="Spark's Python Data Source API needs pyspark >= 4.0"
    ),
]
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string()), ("seq", pa.int64())])


def test_upsert_stream_into_a_rest_table_through_the_data_source(
    spark: Any, tmp_path: Path, seaweed: Any, rest_catalog: Any
) -> None:
    name = f"{rest_catalog.test_namespace}.latest"
    rest_catalog.create_table(name, SCHEMA, identifier_fields=["id"])
    source = tmp_path / "in"
    write_batches(
        source,
        [
            [{"id": i, "data": f"a{i}", "seq": i} for i in range(5)],
            [{"id": 1, "data": "b1", "seq": 10}, {"id": 6, "data": "b6", "seq": 11}],
        ],
    )

    def run() -> None:
        register(spark)
        df = spark.readStream.schema("id long, data string, seq long")
        df = df.option("maxFilesPerTrigger", 1).json(str(source)).repartition("id")
        writer = df.writeStream.format("stream_sink").option("table", name)
        for key, value in seaweed.rest_props("warehouse").items():
            writer = writer.option(f"catalog.{key}", value)
        writer = (
            writer.option("catalog.type", "rest")
            .option("mode", "upsert")
            .option("order-by", "seq")
            .option("state-dir", str(tmp_path / "state"))
            .option("checkpointLocation", str(tmp_path / "chk"))
        )
        writer.trigger(availableNow=True).start().awaitTermination()

    run()
    write_batches(source, [[{"id": 2, "data": "c2", "seq": 20}]], first=2)
    run()

    table = rest_catalog.load_table(name)
    marks = [s.summary["stream-sink.max-committed-checkpoint-id"] for s in table.snapshots()]
    assert marks == ["0", "1", "2"]  # one commit per batch, none twice
    got = table.scan().to_arrow()
    rows = sorted(zip(got["id"].to_pylist(), got["data"].to_pylist(), strict=True))
    assert rows == [(0, "a0"), (1, "b1"), (2, "c2"), (3, "a3"), (4, "a4"), (6, "b6")]
