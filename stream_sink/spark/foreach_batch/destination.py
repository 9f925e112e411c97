"""Where an ``IcebergSink``'s micro-batches go: one table, or the tables a column names.

``IcebergSink`` picks its destination once, when it is made: :class:`~.one_table.OneTable`
for ``table=``, :class:`~.routing.Router` for ``table_column=``; every call of the sink
then goes to that one object, so the sink itself never asks which it holds.

Invariants every destination keeps: ``write_batch`` returns only when the batch is
durable (in the operator state or in its tables); after any error the sink calls
``abandon``, which releases the operator state and never raises, and the next
``write_batch`` restores afresh; ``end_input`` commits what an earlier run left
when no batch of this run came; ``run_ended`` lets the next run do that again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from stream_sink.maintenance import MaintenanceMetricsSnapshot
from stream_sink.metrics.committer import CommitterMetricsSnapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Maintained(Protocol):
    """The in-job maintenance of a destination (one table's, or every routed table's)."""

    @property
    def metrics(self) -> MaintenanceMetricsSnapshot: ...

    def wait(self, timeout: float | None = None) -> None: ...


class Destination(Protocol):
    """What ``IcebergSink`` calls, whichever destination it writes (see module)."""

    @property
    def job_id(self) -> str | None:
        """The query id whose progress events the sink reports; None: every event."""
        ...

    @property
    def maintenance(self) -> Maintained | None:
        """The in-job maintenance; None when not enabled (or not started yet)."""
        ...

    def write_batch(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` of ``df``; durable (exactly once) on return."""
        ...

    def end_input(self) -> None:
        """Checkpoint and commit every batch not yet committed (end of input or stop)."""
        ...

    def end_run_gaps(self) -> None:
        """Record the batches Spark acknowledged after the last one this run handed over
        as skipped (:mod:`.batch_gaps`)."""
        ...

    def committer_metrics(self) -> CommitterMetricsSnapshot | None:
        """The committer's metrics now, or as of its last use; None: none kept."""
        ...

    def abandon(self) -> None:
        """Release the operator state without a final checkpoint; never raises."""
        ...

    def run_ended(self) -> None:
        """The query's run ended (the sink closed): the next run may open it again."""
        ...
