"""A streaming job for the truncate kill tests: Debezium events with TRUNCATEs into a sink.

``python truncate_kill_job.py ROOT TARGET`` reads ROOT/in (JSON Kafka records ``key``,
``value``, one file per micro-batch) through ``from_debezium`` into the Iceberg table
``db.orders`` of the Hadoop catalog under ROOT/warehouse (TARGET ``iceberg``, upsert) or
the Delta table ROOT/lake (``delta``, upsert); checkpoints under ROOT/chk, state under
ROOT/state. Prints ``batch <sink> <id>`` as each micro-batch starts and ``done`` at the
end.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# run as a script: kill_job.py is in the folder above
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kill_job import run

import stream_sink as ss
from stream_sink.spark import (
    ORDER_COLUMN,
    ROW_KIND_COLUMN,
    DeltaSink,
    IcebergSink,
    from_debezium,
    local_session,
)

ROW_SCHEMA = "order_id long, created_at timestamp, status string, amount double"


def main(root: Path, target: str) -> None:
    spark = local_session("truncate-kill")
    common = dict(
        mode="upsert",
        row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN,
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
    )
    sink: IcebergSink | DeltaSink
    if target == "iceberg":
        catalog = ss.load_catalog("c", type="hadoop", warehouse=str(root / "warehouse"))
        sink = IcebergSink(catalog=catalog, table="db.orders", **common)  # type: ignore[arg-type]
    else:
        sink = DeltaSink(path=str(root / "lake"), equality_fields=["order_id"], **common)  # type: ignore[arg-type]

    def changes(kafka: Any, _batch_id: int) -> Any:
        return from_debezium(kafka, row_schema=ROW_SCHEMA, order_by="source.lsn")

    run(spark, sink, root / "in", "key string, value string", shape=changes)
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
