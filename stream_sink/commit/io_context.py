"""Storage failures in the sink's steps, said in the sink's terms.

A lower layer names the path (:mod:`stream_sink.io.errors`); here each step of the
protocol adds the sink, the table, the batch or checkpoint, and what the failure means
for the data. In every step of the protocol the answer is the same: nothing is lost,
because nothing is acknowledged or forgotten before it is durable, and a restart after
the storage is fixed commits every batch exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from stream_sink.exceptions import SinkIOError

NOT_ACKNOWLEDGED = (
    "the batch was not acknowledged; once the storage is fixed, restart the query: Spark "
    "runs the batch again and it commits exactly once"
)
STILL_PENDING = (
    "its batches stay pending in the operator state; once the storage is fixed, restart "
    "the query: they commit exactly once"
)
STILL_STAGED = (
    "its batches stay staged in the operator state; once the storage is fixed, restart "
    "the query: they commit exactly once"
)
RESTORE = (
    "the state and the table are as the previous run left them; once the storage is "
    "fixed, restart the query: every batch commits exactly once"
)


@contextmanager
def in_step(sink_id: str, table_name: str, step: str, assurance: str) -> Iterator[None]:
    """Re-raise a SinkIOError inside with the sink, table, ``step`` and ``assurance``."""
    try:
        yield
    except SinkIOError as e:
        if "Nothing is lost" in str(e):
            raise
        raise SinkIOError(
            f"sink {sink_id} (table {table_name}), {step}: {e}. Nothing is lost: {assurance}"
        ) from e
