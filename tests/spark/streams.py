"""Streaming helpers for the Spark tests: input files written batch by batch, and an
available-now query over them.

Streams read a directory of JSON-lines files with ``maxFilesPerTrigger=1``, so file i is
micro-batch i; files get increasing modification times so Spark takes them in order.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ForeachBatch = Callable[[Any, int], None]


def write_batches(
    directory: Path, batches: Sequence[Sequence[dict[str, Any]]], first: int = 0
) -> None:
    """Write ``batches[i]`` as ``batch-<first+i>.json`` (JSON lines), in order."""
    directory.mkdir(parents=True, exist_ok=True)
    base = time.time() - 10_000
    for i, rows in enumerate(batches, start=first):
        path = directory / f"batch-{i:05d}.json"
        tmp = directory / f".batch-{i:05d}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(tmp, (base + i, base + i))
        tmp.rename(path)


def run_available(
    spark: Any, source: Path, schema: str, foreach: ForeachBatch, checkpoint: str
) -> None:
    """Run every file now in ``source`` through ``foreach``, one file per micro-batch;
    an error in a batch is raised (StreamingQueryException) after the query stopped."""
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        df.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
