"""The CDC pipeline's driver as a process of its own, for the tests that SIGKILL it:
Spark's Kafka source → ``from_debezium`` → an upsert sink, on a processing-time trigger.

``python cdc_job.py ROOT BOOTSTRAP TOPIC iceberg|delta [ROW_SCHEMA]`` streams the Debezium
events of TOPIC into table ``db.mirror`` of the Hadoop catalog under ROOT/warehouse
(iceberg; the table must exist) or the Delta table ROOT/delta (delta), checkpoints under
ROOT/chk, state under ROOT/state. ROW_SCHEMA (a DDL string) is the rows' schema, else it
is read from each batch's Kafka Connect schemas. Spark's Kafka source comes from
``STREAM_SINK_SPARK_JARS`` (``spark.jars``). ``STREAM_SINK_CDC_CATALOG`` (JSON
``load_catalog`` keyword arguments) and ``STREAM_SINK_CDC_TABLE`` move the Iceberg table to
another catalog (the cluster demo's REST catalog), ``STREAM_SINK_CDC_MASTER`` names a Spark
master. It prints ``batch <id>`` as each micro-batch starts and runs until SIGTERM (then
stops the query and exits 0) or SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from debezium_pipeline import SINK_OPTIONS, debezium_batches, kafka_stream

import stream_sink as ss
from stream_sink.spark import DeltaSink, IcebergSink, local_session

KAFKA_RETRIES = {
    # survive a broker restart: the source retries its offset requests instead of failing
    "fetchOffset.numRetries": "120",
    "fetchOffset.retryIntervalMs": "1000",
    "kafka.default.api.timeout.ms": "120000",
}


def sink_for(root: Path, target: str) -> Any:
    common = {
        "checkpoint_location": str(root / "chk"),
        "state_dir": str(root / "state"),
        **SINK_OPTIONS,
    }
    if target == "delta":
        return DeltaSink(path=str(root / "delta"), equality_fields=["pk"], **common)
    props = json.loads(os.environ.get("STREAM_SINK_CDC_CATALOG") or "{}") or {
        "type": "hadoop",
        "warehouse": str(root / "warehouse"),
    }
    catalog = ss.load_catalog("job", **props)
    table = os.environ.get("STREAM_SINK_CDC_TABLE", "db.mirror")
    return IcebergSink(catalog=catalog, table=table, **common)


def main(root: Path, bootstrap: str, topic: str, target: str, row_schema: str | None) -> None:
    jars = os.environ.get("STREAM_SINK_SPARK_JARS")
    master = os.environ.get("STREAM_SINK_CDC_MASTER", "local[2]")
    spark = local_session("cdc-job", master=master, conf={"spark.jars": jars} if jars else None)
    sink = sink_for(root, target)
    apply = debezium_batches(sink, row_schema)

    def batch(df: Any, batch_id: int) -> None:
        print(f"batch {batch_id}", flush=True)
        apply(df, batch_id)

    df = kafka_stream(spark, bootstrap, topic, **KAFKA_RETRIES)
    query = (
        df.writeStream.foreachBatch(batch)
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(processingTime="1 second")
        .start()
    )
    # the handler only flags: stopping the query from it would re-enter Py4J's socket,
    # which the main thread is reading inside awaitTermination (Py4JNetworkError)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("started", flush=True)
    try:
        while not stop.is_set() and not query.awaitTermination(1):
            pass
        query.stop()
    finally:
        sink.close()


if __name__ == "__main__":
    main(
        Path(sys.argv[1]),
        sys.argv[2],
        sys.argv[3],
        sys.argv[4],
        sys.argv[5] if len(sys.argv) > 5 else None,
    )
