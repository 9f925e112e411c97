"""The shop's streaming job as a process of its own, for the test that SIGKILLs it: one
Kafka query per target, each reading the shop's three Debezium topics into three Iceberg
tables through ONE routed sink (``IcebergSink(table_column="_table")``).

``python shop_job.py ROOT BOOTSTRAP PREFIX MAX_OFFSETS`` runs the targets that
``STREAM_SINK_SHOP_TARGETS`` lists (JSON: ``[{"name", "catalog_name", "catalog",
"namespace", "transactions"}]``, ``catalog`` being ``load_catalog``'s keyword arguments),
each with its checkpoints under ROOT/<name>/chk (Spark's: ROOT/<name>/spark) and its
state under ROOT/<name>/state, sink id ``shop``, ``maxOffsetsPerTrigger=MAX_OFFSETS``
(small, so micro-batches cut source transactions) on a one-second trigger. All targets
share one driver (one JVM: the machine running the test has few cores).

- ``"transactions": true``: the query also reads ``<PREFIX>.transaction`` (Debezium's
  BEGIN/END events), ``from_debezium(..., transactions=True)`` keeps them as marker
  rows, and the sink (``transactions="debezium"``) commits only complete source
  transactions.
- ``"transactions": false``: the data topics only, no transaction handling (what a sink
  does today).

A target whose namespace is not ``public`` gets the tables ``<namespace>.<table>``
(the routing column rewritten), so both kinds of job can write one catalog. Spark's
Kafka source comes from ``STREAM_SINK_SPARK_JARS``. Prints ``batch <target> <id>`` as
each micro-batch starts; runs until SIGTERM (then stops the queries and exits 0) or
SIGKILL. A target with transactions prints ``hold <target> <id> held=… forced=…
completed=…`` (this run's counts) after each batch.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from debezium_pipeline import kafka_stream
from shop_workload import ROW_SCHEMAS, TABLES

import stream_sink as ss
from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, IcebergSink, local_session
from stream_sink.spark.cdc import from_debezium

SOURCE_NAMESPACE = "public"
SINK_ID = "shop"


def topics(prefix: str, transactions: bool) -> list[str]:
    """The data topics, and with ``transactions`` the transaction topic."""
    data = [f"{prefix}.{SOURCE_NAMESPACE}.{t}" for t in TABLES]
    return [*data, f"{prefix}.transaction"] if transactions else data


def sink_for(root: Path, target: dict[str, Any], transactions: bool) -> IcebergSink:
    home = root / target["name"]
    held = {"transactions": "debezium"} if transactions else {}
    return IcebergSink(
        catalog=ss.load_catalog(target["catalog_name"], **target["catalog"]),
        table_column="_table",
        namespaces=[target["namespace"]],
        create_tables=True,
        mode="upsert",
        row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN,
        sink_id=SINK_ID,
        checkpoint_location=str(home / "chk"),
        spark_checkpoint_location=str(home / "spark"),
        state_dir=str(home / "state"),
        **held,  # type: ignore[arg-type]
    )


def batches(sink: IcebergSink, target: dict[str, Any], transactions: bool) -> Any:
    """The ``foreachBatch`` function of one target."""
    from pyspark.sql import functions as F

    extra = {"transactions": True} if transactions else {}
    namespace = target["namespace"]

    def apply(batch: Any, batch_id: int) -> None:
        print(f"batch {target['name']} {batch_id}", flush=True)
        changes = from_debezium(
            batch, row_schema=ROW_SCHEMAS, table_column="_table", key_column="key", **extra
        )
        if namespace != SOURCE_NAMESPACE:
            renamed = F.regexp_replace("_table", rf"^{SOURCE_NAMESPACE}\.", f"{namespace}.")
            changes = changes.withColumn("_table", renamed)
        sink.foreach_batch(changes, batch_id)
        if transactions:
            m = sink.transaction_metrics
            print(
                f"hold {target['name']} {batch_id} held={m.held_transactions} "
                f"forced={m.forced_transactions} completed={m.completed_transactions}",
                flush=True,
            )

    return apply


def main(root: Path, bootstrap: str, prefix: str, max_offsets: int) -> None:
    jars = os.environ.get("STREAM_SINK_SPARK_JARS")
    spark = local_session("shop-job", conf={"spark.jars": jars} if jars else None)
    sinks, queries = [], []
    try:
        for target in json.loads(os.environ["STREAM_SINK_SHOP_TARGETS"]):
            transactions = bool(target["transactions"])
            sink = sink_for(root, target, transactions)
            sinks.append(sink)
            subscribed = ",".join(topics(prefix, transactions))
            df = kafka_stream(spark, bootstrap, subscribed, maxOffsetsPerTrigger=str(max_offsets))
            queries.append(
                df.writeStream.foreachBatch(batches(sink, target, transactions))
                .queryName(f"shop-{target['name']}")
                .option("checkpointLocation", sink.spark_checkpoint_location)
                .trigger(processingTime="1 second")
                .start()
            )
        # the handler only flags: stopping a query from it would re-enter Py4J's socket,
        # which the main thread is reading inside awaitTermination (Py4JNetworkError)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        print("started", flush=True)
        while not stop.is_set() and not spark.streams.awaitAnyTermination(1):
            pass
        for query in queries:
            query.stop()
        for query in queries:  # a query that failed says why
            query.awaitTermination()
    finally:
        for sink in sinks:
            sink.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]))
