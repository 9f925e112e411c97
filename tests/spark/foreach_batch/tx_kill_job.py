"""A streaming job for the source-transaction kill test: ``tx_events``' transactions
over three tables through one routed ``IcebergSink(transactions="debezium")`` into the
SQL catalog (SQLite) under ROOT, whose checkpoints commit the three tables in one
database transaction.

``python tx_kill_job.py ROOT`` reads ROOT/in (JSON Kafka records ``key``, ``value``, one
file per micro-batch); checkpoints under ROOT/chk, state under ROOT/state. Prints
``batch <sink> <id>`` as each micro-batch starts and ``done`` at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# run as a script: kill_job.py and tx_events.py are in the folder above
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kill_job import run
from tx_events import SOURCE_SCHEMA, TABLES, sql_catalog_at

from stream_sink.spark import IcebergSink, from_debezium, local_session


def main(root: Path) -> None:
    spark = local_session("tx-kill")
    sink = IcebergSink(
        catalog=sql_catalog_at(root),
        table_column="_table",
        namespaces=["inv", "shop"],
        create_tables=True,
        mode="upsert",
        row_kind_column="_row_kind",
        order_by="_cdc_order",
        transactions="debezium",
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
    )

    def changes(batch: Any, _batch_id: int) -> Any:
        return from_debezium(
            batch, row_schema=TABLES, table_column="_table", key_column="key", transactions=True
        )

    run(spark, sink, root / "in", SOURCE_SCHEMA, shape=changes)
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
