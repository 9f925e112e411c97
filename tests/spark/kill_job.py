"""A streaming job for the kill tests: an append stream, then an upsert stream.

``python kill_job.py ROOT`` reads ROOT/append-in and ROOT/upsert-in (JSON files, one per
micro-batch) into tables of the Hadoop catalog under ROOT/warehouse, checkpoints under
ROOT/chk-*, state under ROOT/state. It prints ``batch <sink> <id>`` as each micro-batch
starts, so the test knows Spark is running before it kills the process.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import stream_sink as ss
from stream_sink.spark import IcebergSink, local_session


def run(spark: Any, sink: IcebergSink, source: Path, schema: str) -> None:
    def foreach(df: Any, batch_id: int) -> None:
        print(f"batch {sink.sink_id} {batch_id}", flush=True)
        sink.foreach_batch(df, batch_id)

    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        df.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        sink.close()


def main(root: Path) -> None:
    spark = local_session("stream-sink-kill-test")
    catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(root / "warehouse"))
    common: dict[str, Any] = {"catalog": catalog, "state_dir": str(root / "state")}
    append = IcebergSink(table="db.events", checkpoint_location=str(root / "chk-append"), **common)
    run(spark, append, root / "append-in", "id long, data string")
    upsert = IcebergSink(
        table="db.latest",
        mode="upsert",
        order_by="seq",
        checkpoint_location=str(root / "chk-upsert"),
        **common,
    )
    run(spark, upsert, root / "upsert-in", "id long, data string, seq long")
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
