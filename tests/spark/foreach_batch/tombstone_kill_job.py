"""A streaming job for the tombstone kill test: Debezium records with Connect schemas
(``connect_events``), batches of tombstones only among them, through docs/debezium.md's
foreachBatch function into ``shop.orders`` (upsert) of the Hadoop catalog under
ROOT/warehouse.

``python tombstone_kill_job.py ROOT`` reads ROOT/in (JSON Kafka records ``key``,
``value``, one file per micro-batch); checkpoints under ROOT/chk, state under
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
    IcebergSink,
    debezium_row_schema,
    from_debezium,
    local_session,
)


def main(root: Path) -> None:
    spark = local_session("tombstone-kill")
    catalog = ss.load_catalog("c", type="hadoop", warehouse=str(root / "warehouse"))
    sink = IcebergSink(
        catalog=catalog,
        table="shop.orders",
        mode="upsert",
        row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN,
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
    )

    def changes(batch: Any, _batch_id: int) -> Any:
        return from_debezium(batch, row_schema=debezium_row_schema(batch))

    run(spark, sink, root / "in", "key string, value string", shape=changes)
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
