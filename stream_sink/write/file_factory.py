"""Names for the files one task attempt writes (Java's OutputFileFactory).

A file is ``<data location>/<partition path>/<PPPPP>-<task>-<operation>-<attempt>-<NNNNN>.parquet``
(Java's ``%05d-%d-%s-%05d`` with the attempt folded into the operation id).

Invariants:
- Names are unique per (partition id, task id, operation id, attempt id, counter);
  the operation id carries a uuid, so two writes (or two runs) never collide, and a
  retried task attempt never overwrites the files of an earlier attempt.
- The factory is picklable; the counter travels with it, so a copy must not be
  used next to its original for the same attempt (make one per attempt).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from stream_sink.table.partitioning import PartitionSpec


def new_operation_id() -> str:
    """A fresh operation id (a uuid); callers may prefix something meaningful."""
    return str(uuid.uuid4())


@dataclass
class OutputFileFactory:
    data_location: str
    spec: PartitionSpec
    partition_id: int
    task_id: int
    attempt_id: int = 0
    operation_id: str = field(default_factory=new_operation_id)
    _count: int = 0

    def new_location(
        self,
        partition: tuple[Any, ...] | None = None,
        suffix: str | None = None,
        extension: str = "parquet",
    ) -> str:
        """A location never handed out before; ``partition`` is the internal-value tuple."""
        self._count += 1
        tail = f"-{suffix}" if suffix else ""
        name = (
            f"{self.partition_id:05d}-{self.task_id}-{self.operation_id}-{self.attempt_id}"
            f"-{self._count:05d}{tail}.{extension}"
        )
        if partition is None or self.spec.is_unpartitioned:
            return f"{self.data_location}/{name}"
        return f"{self.data_location}/{self.spec.partition_path(partition)}/{name}"
