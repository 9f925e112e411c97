"""A Kafka append stream for the resume tests, as a process of its own (killed by them).

``python resume_kafka_job.py ROOT BOOTSTRAP TOPIC CHECKPOINT [RESUME STARTING]`` streams
TOPIC (values are ids) into table ``STREAM_SINK_RESUME_TABLE`` (default ``db.events``) of
the catalog whose ``load_catalog`` arguments are the JSON object
``STREAM_SINK_RESUME_CATALOG`` (default: the Hadoop catalog under ROOT/warehouse) with
``IcebergSink`` (``STREAM_SINK_RESUME_TARGET=delta``: into the Delta
table ROOT/delta with ``DeltaSink``; ``STREAM_SINK_RESUME_MODE=upsert``: values are
``<id>,<v>`` upserted by id in Kafka offset order; sink id ``events``, checkpoints under
ROOT/CHECKPOINT, state under ROOT/state), five records per micro-batch, until the topic
is consumed. RESUME and STARTING are ``resume_from_table`` and Kafka's
``startingOffsets`` (default: none and ``earliest``). Spark's Kafka source comes from
``STREAM_SINK_SPARK_JARS``. It prints ``batch <id>`` as each micro-batch starts and
``done`` at the end.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import stream_sink as ss
from stream_sink.spark import DeltaSink, IcebergSink, local_session


def main(root: Path, bootstrap: str, topic: str, checkpoint: str, *resume: str) -> None:
    jars = os.environ.get("STREAM_SINK_SPARK_JARS")
    spark = local_session("resume-job", conf={"spark.jars": jars} if jars else None)
    upsert = os.environ.get("STREAM_SINK_RESUME_MODE") == "upsert"
    common: dict[str, Any] = {
        "sink_id": "events",
        "checkpoint_location": str(root / checkpoint),
        "state_dir": str(root / "state"),
        "resume_from_table": resume[0] if resume else None,
    }
    if upsert:
        common.update(mode="upsert", equality_fields=["id"], order_by="seq")
    sink: Any
    if os.environ.get("STREAM_SINK_RESUME_TARGET") == "delta":
        sink = DeltaSink(path=str(root / "delta"), **common)
    else:
        default = {"type": "hadoop", "warehouse": str(root / "warehouse")}
        props = json.loads(os.environ.get("STREAM_SINK_RESUME_CATALOG") or json.dumps(default))
        catalog = ss.load_catalog("job", **props)
        table = os.environ.get("STREAM_SINK_RESUME_TABLE", "db.events")
        sink = IcebergSink(catalog=catalog, table=table, **common)

    def batch(df: Any, batch_id: int) -> None:
        print(f"batch {batch_id}", flush=True)
        columns = ["CAST(CAST(value AS STRING) AS BIGINT) AS id"]
        if upsert:
            parts = "split(CAST(value AS STRING), ',')"
            columns = [f"CAST({parts}[0] AS BIGINT) AS id", f"{parts}[1] AS v", "offset AS seq"]
        sink.foreach_batch(df.selectExpr(*columns), batch_id)

    df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", resume[1] if resume else "earliest")
        .option("maxOffsetsPerTrigger", "5")
        .load()
    )
    query = (
        df.writeStream.foreachBatch(batch)
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        sink.close()
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], *sys.argv[5:7])
