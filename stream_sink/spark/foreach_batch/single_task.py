"""Whether a micro-batch's write job runs as one task with no shuffle (driver side).

A CDC batch that Spark reads in one partition (a file source reading one small file per
trigger, say) needs no shuffle by key: all its changes are in that one task already. The
sink then skips the exchange, Spark's sort and the input sequence column, and the task
orders its rows itself (:mod:`stream_sink.spark.cdc.ordering`), which saves a stage per micro-batch.

Invariants:
- True only when the planned job has no exchange (so planning it ran nothing and its
  partitions are those of its scan), reads exactly one partition, and Spark estimates
  its input at most :data:`MAX_BYTES` (the task holds the batch in memory). Sources
  without a size estimate (Kafka, rate) report an unbounded size and never qualify.
- Any failure to inspect the plan (Spark Connect has no JVM handle) answers False: the
  distributed route is always correct, this one is only faster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MAX_BYTES = 32 * 1024 * 1024
"""Largest estimated input (Spark's ``sizeInBytes``) of a batch sorted in its task. The
estimate of a file source is the files' size, and compressed Parquet can grow several
times in memory: the task holds the batch and its sorted copy. The saving (one stage per
batch) matters most for small batches anyway."""

_EXCHANGES = ("Exchange", "AdaptiveSparkPlan", "Subquery")


def runs_in_one_task(job: DataFrame, max_bytes: int = MAX_BYTES) -> bool:
    """Whether ``job`` (the batch's write job, not yet run) reads one partition and no
    more than ``max_bytes`` as Spark estimates it, with no exchange in its plan."""
    try:
        execution = job._jdf.queryExecution()
        if int(str(execution.optimizedPlan().stats().sizeInBytes())) > max_bytes:
            return False
        plan = execution.executedPlan()
        if any(name in plan.toString() for name in _EXCHANGES):
            return False
        return int(plan.execute().getNumPartitions()) == 1
    except Exception:  # an uninspectable plan takes the distributed route
        return False
