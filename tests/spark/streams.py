"""Streaming helpers for the Spark tests: input files written batch by batch
(``write_batches``, from the kill harness), and an available-now query over them.

Streams read a directory of JSON-lines files with ``maxFilesPerTrigger=1``, so file i is
micro-batch i; files get increasing modification times so Spark takes them in order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kill_harness import write_batches

__all__ = ["ForeachBatch", "persisted_rdds", "run_available", "run_sink", "write_batches"]

ForeachBatch = Callable[[Any, int], None]


def run_available(
    spark: Any, source: Path, schema: str, foreach: ForeachBatch, checkpoint: str
) -> Any:
    """Run every file now in ``source`` through ``foreach``, one file per micro-batch;
    an error in a batch is raised (StreamingQueryException) after the query stopped.
    Returns the stopped query (its ``recentProgress`` says what each batch read)."""
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        df.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


def run_sink(spark: Any, source: Path, schema: str, sink: Any) -> None:
    """:func:`run_available` into ``sink.foreach_batch`` under its checkpoint location;
    the sink is closed after, whatever happened."""
    try:
        run_available(spark, source, schema, sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()


def persisted_rdds(spark: Any) -> int:
    """How many RDDs the session holds persisted (what Spark's UI lists under Storage):
    a sink that persists a batch for its jobs leaves this as it found it."""
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())
