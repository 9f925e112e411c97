"""A streaming job for the evolution kill test: a stream whose later batches add a column,
widen a type and bring nulls into a required column (``schema_evolution="compatible"``),
then a Debezium stream of three tables into three tables through one query.

``python evolve_kill_job.py ROOT`` reads ROOT/evo-in and ROOT/deb-in (JSON files, one per
micro-batch) into the Hadoop catalog under ROOT/wh; prints ``batch <sink> <id>`` as each
micro-batch starts and ``done`` at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kill_job import run
from many_tables import SOURCE_SCHEMA, TABLES

import stream_sink as ss
from stream_sink.spark import IcebergSink, local_session
from stream_sink.spark.cdc.debezium import from_debezium

EVO_SOURCE = "id long, n long, must string, note string"


def shaped(df: Any, batch_id: int) -> Any:
    """Batch 0: the table's shape; 1: adds ``note``; 2 and later: ``n`` as long."""
    from pyspark.sql import functions as F

    n = F.col("n").cast("long" if batch_id >= 2 else "int").alias("n")
    cols = [F.col("id"), n, F.col("must")] + ([F.col("note")] if batch_id >= 1 else [])
    return df.select(*cols)


def debezium(df: Any, _batch_id: int) -> Any:
    return from_debezium(df, row_schema=TABLES, table_column="_table", key_column="key")


def main(root: Path) -> None:
    spark = local_session("stream-sink-evolve-kill-test")
    catalog = ss.load_catalog("evo", type="hadoop", warehouse=str(root / "wh"))
    state = str(root / "state")
    evo = IcebergSink(
        catalog=catalog,
        table="db.evo",
        schema_evolution="compatible",
        checkpoint_location=str(root / "chk-evo"),
        state_dir=state,
    )
    run(spark, evo, root / "evo-in", EVO_SOURCE, shaped)
    routed = IcebergSink(
        catalog=catalog,
        table_column="_table",
        namespaces=["inv", "shop"],
        create_tables=True,
        mode="upsert",
        row_kind_column="_row_kind",
        order_by="_cdc_order",
        checkpoint_location=str(root / "chk-deb"),
        state_dir=state,
    )
    run(spark, routed, root / "deb-in", SOURCE_SCHEMA, debezium)
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
