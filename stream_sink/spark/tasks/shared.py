"""What every executor task of either table format has: its ids and its one result row.

Invariant: a task yields exactly one row of :data:`RESULT_SCHEMA`, one binary column
holding the serialized file metadata of what it wrote (a ``WriteResult`` or a
``DeltaBatch``); rows never return to the driver.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

RESULT_COLUMN = "result"
RESULT_DDL = f"{RESULT_COLUMN} binary"
RESULT_SCHEMA = pa.schema([pa.field(RESULT_COLUMN, pa.binary())])


@dataclass(frozen=True)
class TaskIds:
    partition_id: int
    task_id: int
    attempt_id: int


def current_task_ids() -> TaskIds:
    """Ids of the running Spark task (zeros outside Spark, for local use)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return TaskIds(0, 0, 0)
    return TaskIds(ctx.partitionId(), ctx.taskAttemptId(), ctx.attemptNumber())


def result_batch(serialized: bytes) -> pa.RecordBatch:
    """The one result row of a task."""
    return pa.RecordBatch.from_arrays([pa.array([serialized], pa.binary())], schema=RESULT_SCHEMA)
