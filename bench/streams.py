"""What the Spark stream benchmarks share: a Parquet file stream, a sink run until the
input is drained, and the JVM's peak memory.

Invariants: every run uses ``trigger(availableNow=True)``, so a timed run ends when the
input it was given is committed, and the time includes the query's start and stop (the
same for every side of a comparison).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def parquet_stream(spark: Any, source: Path, files_per_trigger: int) -> Any:
    """A streaming DataFrame over the Parquet files in ``source``, oldest first."""
    return (
        spark.readStream.schema(spark.read.parquet(str(source)).schema)
        .option("maxFilesPerTrigger", files_per_trigger)
        .parquet(str(source))
    )


def drain_into(sink: Any, df: Any) -> tuple[float, Any]:
    """Seconds until ``df`` is drained into ``sink`` (an IcebergSink), and the query.

    The sink is closed afterwards; the query is returned for its progress reports.
    """
    started = time.perf_counter()
    q = (
        df.writeStream.foreachBatch(sink.foreach_batch)
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    sink.close()
    return time.perf_counter() - started, q


def jvm_peak_mib(spark: Any) -> float:
    """Peak resident memory (VmHWM) of the session's JVM; 0 when it cannot be read."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (AttributeError, OSError, ValueError):
        pass
    return 0.0


def dedup_merge_sql(target: str, view: str) -> str:
    """What a Spark user writes to upsert a micro-batch of changes (``id``, ``name``,
    ``amount``, ``qty``, ``seq``, ``_row_kind``) registered as ``view``: the latest change
    of each id, then ``MERGE INTO target`` deleting ``-D`` ids, updating or inserting
    the rest."""
    return f"""
        MERGE INTO {target} t
        USING (
          SELECT * FROM (
            SELECT *, row_number() OVER (PARTITION BY id ORDER BY seq DESC) AS rn
            FROM {view}) WHERE rn = 1
        ) s
        ON t.id = s.id
        WHEN MATCHED AND s._row_kind = '-D' THEN DELETE
        WHEN MATCHED THEN UPDATE SET
          t.name = s.name, t.amount = s.amount, t.qty = s.qty, t.seq = s.seq
        WHEN NOT MATCHED AND s._row_kind != '-D' THEN INSERT
          (id, name, amount, qty, seq) VALUES (s.id, s.name, s.amount, s.qty, s.seq)
        """
