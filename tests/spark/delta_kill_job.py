"""A streaming job for the Delta kill tests: an append stream, then an upsert stream.

``python delta_kill_job.py ROOT [ROUTE]`` reads ROOT/append-in and ROOT/upsert-in (JSON
files, one per micro-batch) into Delta tables ROOT/lake/events and ROOT/lake/latest, with
checkpoints under ROOT/dchk-* and state under ROOT/dstate. ROUTE is ``foreach``
(``DeltaSink.foreach_batch``, the default), ``foreach-positions`` (its upsert stream
only, ``deletes="positions"``), ``source`` (``format("stream_sink")`` with target
``delta``) or ``source-upsert`` (its upsert stream only). It prints ``batch
<sink> <id>`` as each micro-batch starts (``foreach``) or once the query runs
(``source``), so the test knows Spark is running before it kills it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kill_job import run

from stream_sink.spark import DeltaSink, local_session, register


def run_source(spark: Any, root: Path, name: str, schema: str, **options: str) -> None:
    df = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(root / f"{name}-in"))
    )
    if options.get("mode") == "upsert":
        df = df.repartition("id")
    writer = (
        df.writeStream.format("stream_sink")
        .option("target", "delta")
        .option("state-dir", str(root / "dstate"))
        .option("checkpointLocation", str(root / f"dchk-{name}"))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    table = "events" if name == "append" else "latest"
    query = writer.trigger(availableNow=True).start(str(root / "lake" / table))
    print(f"batch {table} started", flush=True)
    query.awaitTermination()


UPSERT_SCHEMA = "id long, data string, seq long"


def upsert_sink(root: Path, deletes: str) -> DeltaSink:
    """The upsert stream's sink into ROOT/lake/latest."""
    return DeltaSink(
        path=str(root / "lake" / "latest"),
        mode="upsert",
        equality_fields=["id"],
        order_by="seq",
        checkpoint_location=str(root / "dchk-upsert"),
        state_dir=str(root / "dstate"),
        deletes=deletes,
    )


def main(root: Path, route: str) -> None:
    spark = local_session("stream-sink-delta-kill-test")
    if route in ("source", "source-upsert"):
        register(spark)
        if route == "source":
            run_source(spark, root, "append", "id long, data string, p string", partition_by="p")
        run_source(
            spark,
            root,
            "upsert",
            "id long, data string, seq long",
            mode="upsert",
            equality_fields="id",
            order_by="seq",
        )
        print("done", flush=True)
        return
    state = str(root / "dstate")
    if route == "foreach-positions":
        run(spark, upsert_sink(root, "positions"), root / "upsert-in", UPSERT_SCHEMA)
        print("done", flush=True)
        return
    append = DeltaSink(
        path=str(root / "lake" / "events"),
        partition_by=["p"],
        checkpoint_location=str(root / "dchk-append"),
        state_dir=state,
    )
    run(spark, append, root / "append-in", "id long, data string, p string")
    run(spark, upsert_sink(root, "copy-on-write"), root / "upsert-in", UPSERT_SCHEMA)
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "foreach")
