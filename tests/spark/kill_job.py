"""A streaming job for the kill tests: an append stream, then an upsert stream.

``python kill_job.py ROOT [ROUTE] [MASTER]`` reads ROOT/append-in and ROOT/upsert-in
(JSON files, one per micro-batch) into tables of the Hadoop catalog under
ROOT/warehouse, checkpoints under ROOT/chk-*, state under ROOT/state. ROUTE is
``foreach`` (``IcebergSink.foreach_batch``, the default) or ``source``
(``format("stream_sink")``); MASTER a Spark master URL (default ``local[2]``). On the
``foreach`` route ``STREAM_SINK_KILL_CATALOG`` (JSON ``load_catalog`` keyword arguments),
``STREAM_SINK_KILL_NAMESPACE`` and ``STREAM_SINK_KILL_CHECKPOINTS`` (a location prefix,
e.g. ``s3://ckpt/run``) move the tables to another catalog and the sink's checkpoints
elsewhere (the REST kill test); ``STREAM_SINK_KILL_S3A`` (JSON ``s3.*`` properties) with
``STREAM_SINK_KILL_SPARK_CHECKPOINTS`` (e.g. ``s3a://ckpt/run``) put Spark's own
checkpoints on an object store through hadoop-aws (``local_session(s3a=...)``);
``STREAM_SINK_KILL_COMMIT_MODE`` is the sinks' ``commit_mode`` (``foreach``);
``STREAM_SINK_KILL_STREAMS=upsert`` (or ``append``) runs that stream only (either
route); on the ``source`` route ``STREAM_SINK_KILL_APPEND_OPTIONS`` (a JSON object) adds
``format("stream_sink")`` options to the append stream (e.g. ``maintenance.*``);
``STREAM_SINK_KILL_DELETES`` is the upsert stream's ``deletes`` (either route). It prints
``batch <sink> <id>`` as each micro-batch starts (``foreach``) or once the query runs
(``source``), so the test knows Spark is running before it kills the process.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import stream_sink as ss
from stream_sink.spark import IcebergSink, local_session, register

APPEND_SCHEMA, UPSERT_SCHEMA = "id long, data string", "id long, data string, seq long"


def run(spark: Any, sink: Any, source: Path, schema: str, shape: Any = None) -> None:
    """Stream ``source`` (JSON, one file per micro-batch) into ``sink`` (an IcebergSink or a
    DeltaSink) until it is consumed, printing ``batch <sink> <id>`` as each batch starts;
    ``shape(df, batch_id)`` reshapes each batch first."""

    def foreach(df: Any, batch_id: int) -> None:
        print(f"batch {sink.sink_id} {batch_id}", flush=True)
        sink.foreach_batch(df if shape is None else shape(df, batch_id), batch_id)

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


def run_source(
    spark: Any, root: Path, table: str, source: Path, schema: str, **options: str
) -> None:
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    if options.get("mode") == "upsert":
        df = df.repartition("id")
    writer = (
        df.writeStream.format("stream_sink")
        .option("catalog.warehouse", str(root / "warehouse"))
        .option("table", table)
        .option("state-dir", str(root / "state"))
        .option("checkpointLocation", str(root / f"chk-{table}"))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    print(f"batch {table} started", flush=True)
    query.awaitTermination()


def spark_checkpoint(root: Path, chk: str, name: str) -> str | None:
    """Spark's own checkpoint: under ``STREAM_SINK_KILL_SPARK_CHECKPOINTS`` when set (an
    ``s3a://`` prefix), else local when the sink's are on an object store, else beside
    the sink's (the sink's default)."""
    prefix = os.environ.get("STREAM_SINK_KILL_SPARK_CHECKPOINTS")
    if prefix:
        return f"{prefix}/spark-{name}"
    return str(root / f"spark-{name}") if "://" in chk else None


def main(root: Path, route: str, master: str) -> None:
    s3a = json.loads(os.environ.get("STREAM_SINK_KILL_S3A") or "null") or False
    spark = local_session("stream-sink-kill-test", master=master, s3a=s3a)
    streams = os.environ.get("STREAM_SINK_KILL_STREAMS", "append,upsert").split(",")
    if route == "source":
        register(spark)
        if "append" in streams:
            append = json.loads(os.environ.get("STREAM_SINK_KILL_APPEND_OPTIONS") or "{}")
            run_source(spark, root, "db.events", root / "append-in", APPEND_SCHEMA, **append)
        if "upsert" in streams:
            run_source(
                spark,
                root,
                "db.latest",
                root / "upsert-in",
                UPSERT_SCHEMA,
                mode="upsert",
                deletes=os.environ.get("STREAM_SINK_KILL_DELETES", "equality"),
                **{"order-by": "seq"},
            )
        print("done", flush=True)
        return
    hadoop = {"type": "hadoop", "warehouse": str(root / "warehouse")}
    catalog_args = json.loads(os.environ.get("STREAM_SINK_KILL_CATALOG") or "null") or hadoop
    catalog = ss.load_catalog("kill", **catalog_args)
    ns = os.environ.get("STREAM_SINK_KILL_NAMESPACE", "db")
    chk = os.environ.get("STREAM_SINK_KILL_CHECKPOINTS", str(root))
    common: dict[str, Any] = {
        "catalog": catalog,
        "state_dir": str(root / "state"),
        "commit_mode": os.environ.get("STREAM_SINK_KILL_COMMIT_MODE", "synchronous"),
    }
    append = IcebergSink(
        table=f"{ns}.events",
        checkpoint_location=f"{chk}/chk-append",
        spark_checkpoint_location=spark_checkpoint(root, chk, "append"),
        # Spark's own Parquet writer writes the appended files (local tables only: on
        # s3:// it needs hadoop-aws, so object-store runs take the arrow route)
        write_route="auto" if "://" in chk else "spark",
        **common,
    )
    if "append" in streams:
        run(spark, append, root / "append-in", APPEND_SCHEMA)
    else:
        append.close()
    upsert = IcebergSink(
        table=f"{ns}.latest",
        mode="upsert",
        order_by="seq",
        deletes=os.environ.get("STREAM_SINK_KILL_DELETES", "equality"),
        checkpoint_location=f"{chk}/chk-upsert",
        spark_checkpoint_location=spark_checkpoint(root, chk, "upsert"),
        **common,
    )
    run(spark, upsert, root / "upsert-in", UPSERT_SCHEMA)
    print("done", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:] + [""] * 2
    main(Path(args[0]), args[1] or "foreach", args[2] or "local[2]")
