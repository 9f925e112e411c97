"""The streaming upsert job of the maintenance kill scenario.

``python maintenance_kill_job.py ROOT`` upserts ROOT/in (JSON files, one per
micro-batch) into ``db.latest`` of the Hadoop catalog under ROOT/wh, with in-job
maintenance (compaction, conversion, expiry to one snapshot every 3 commits). It
prints ``batch <id>`` as each micro-batch starts and ``done`` at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import stream_sink as ss
from stream_sink.maintenance import MaintenanceOptions
from stream_sink.spark import IcebergSink, local_session


def main(root: Path) -> None:
    spark = local_session("stream-sink-maintenance-kill")
    catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(root / "wh"))
    options = MaintenanceOptions(
        commit_count=3, max_snapshot_age_ms=1, retain_last=1, min_input_files=2
    )
    sink = IcebergSink(
        catalog=catalog,
        table="db.latest",
        mode="upsert",
        order_by="seq",
        row_kind_column="op",
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
        maintenance=options,
    )

    def foreach(df: Any, batch_id: int) -> None:
        print(f"batch {batch_id}", flush=True)
        sink.foreach_batch(df, batch_id)

    schema = "id long, data string, seq long, op string"
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(root / "in"))
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
    print(f"maintenance {sink.maintenance_metrics}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
