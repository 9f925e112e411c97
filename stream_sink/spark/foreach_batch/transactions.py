"""``IcebergSink(transactions="debezium")``: each micro-batch hands the destination only
the change rows of complete source transactions; the rest wait in the sink's hold.

Per batch ``b`` (driver), before the destination sees it:

1. The batch (from ``from_debezium(..., transactions=True)``) is collected to the
   driver as Arrow: its BEGIN/END marker rows apart, its change rows in arrival order.
2. :class:`~stream_sink.commit.transactions.buffer.TransactionBuffer` splits the held
   rows plus ``b``'s against the ENDs seen, and makes the new hold durable in its own
   operator state (``<state dir>/<sink id>.held-transactions``) before anything else.
3. The rows to commit, without the transaction columns, become the DataFrame the
   destination writes and records as batch ``b``.

Invariants:
- The hold is durable before any table records ``b``; a re-run of ``b`` after a crash
  splits as its first run did (the buffer's versions), so each change row is committed
  once, with the batch that completes its transaction (or the one that forces it out).
- A hold whose state is gone while Spark has acknowledged batches cannot be rebuilt
  (Spark will not read those offsets again): the sink refuses to start with
  DataLossError naming the directory, before anything is written.
- Every change row passes through the driver: the batch's size is bounded by the
  driver's memory (``maxOffsetsPerTrigger`` bounds it).
- ``<checkpoint location>/<sink id>/transactions.json`` reports the hold after each
  batch, for ``stream-sink status``.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING

import pyarrow as pa

from stream_sink.commit.transactions.bound import HoldBound
from stream_sink.commit.transactions.buffer import TransactionBuffer
from stream_sink.commit.transactions.markers import TransactionMarker, parse_marker
from stream_sink.commit.transactions.split import TransactionColumns
from stream_sink.exceptions import DataLossError, TransactionMetadataError
from stream_sink.metrics.transactions import (
    TransactionMetrics,
    TransactionMetricsSnapshot,
    hold_report_location,
    write_hold_report,
)
from stream_sink.spark import query
from stream_sink.spark.cdc.control_columns import (
    DATA_COLLECTION_COLUMN,
    TRANSACTION_COLUMNS,
    TRANSACTION_EVENT_COLUMN,
    TRANSACTION_ID_COLUMN,
    TRANSACTION_KEY_COLUMN,
    TRANSACTION_MARKER_COLUMN,
    check_columns,
)
from stream_sink.spark.foreach_batch.arrow_frames import to_arrow, to_frame
from stream_sink.spark.options import SinkOptions
from stream_sink.state import OperatorStateBackend, open_state_backend, state_dir_for
from stream_sink.table.catalog.base import Catalog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

MODES = ("debezium",)
HOLD_SUFFIX = ".held-transactions"
"""The hold's operator id: ``<sink id>.held-transactions``, beside the committers'."""
COLUMNS = TransactionColumns(
    transaction=TRANSACTION_ID_COLUMN,
    collection=DATA_COLLECTION_COLUMN,
    key=TRANSACTION_KEY_COLUMN,
    event=TRANSACTION_EVENT_COLUMN,
)


class TransactionGate:
    """The hold of sink ``options.sink_id`` (see module); opened at the first batch."""

    def __init__(self, catalog: Catalog, options: SinkOptions, bound: HoldBound) -> None:
        self.catalog = catalog
        self.options = options
        self.bound = bound
        self.metrics = TransactionMetrics()
        self._state: OperatorStateBackend | None = None
        self._buffer: TransactionBuffer | None = None

    @property
    def state_path(self) -> str:
        return state_dir_for(self.options.state_dir, self.options.sink_id + HOLD_SUFFIX)

    def admit(self, df: DataFrame, batch_id: int) -> DataFrame:
        """The rows of ``batch_id`` to write now (steps 1-3 of the module)."""
        check_columns(df.schema, gate=True)
        buffer = self._open()
        rows, ends = _collect(df, batch_id)
        split = buffer.split(batch_id, rows, ends)
        buffer.record(batch_id, split)
        self._report()
        commit = split.commit.drop_columns(
            [c for c in TRANSACTION_COLUMNS if c in split.commit.column_names]
        )
        return to_frame(df.sparkSession, commit, df.schema)

    def snapshot(self) -> TransactionMetricsSnapshot:
        return self.metrics.snapshot()

    def close(self) -> None:
        """Release the hold's state (never raises; what was recorded stays durable)."""
        state, self._state, self._buffer = self._state, None, None
        if state is not None:
            try:
                state.close()
            except Exception as e:
                log.warning(
                    "sink %s: closing the held transactions failed: %s", self.options.sink_id, e
                )

    def _open(self) -> TransactionBuffer:
        if self._buffer is not None:
            return self._buffer
        path = self.state_path
        if not os.path.isdir(path):
            self._check_not_lost(path)
        self._state = open_state_backend(
            "rocksdb", path, sink_id=self.options.sink_id + HOLD_SUFFIX
        )
        self._buffer = TransactionBuffer(
            self._state,
            sink=self.options.sink_id,
            bound=self.bound,
            columns=COLUMNS,
            metrics=self.metrics,
        )
        return self._buffer

    def _check_not_lost(self, path: str) -> None:
        """No hold state: fine for a query Spark has acknowledged nothing of; otherwise
        the rows it held are gone with it (DataLossError, nothing written)."""
        location = self.options.spark_checkpoint_location
        acknowledged = query.acknowledged_batch_ids(location, self.catalog.io_for(location))
        if acknowledged:
            raise DataLossError(
                f"sink {self.options.sink_id}: the held source transactions at {path} are "
                f"missing, but Spark's checkpoint {location} acknowledges batches up to "
                f"{acknowledged[-1]}; rows held there would be lost. Restore the directory "
                "(state_dir must outlive the driver), or, for a query that ran without "
                "transactions='debezium' until now or whose hold is gone for good, start "
                "a new query on a new checkpoint location with resume_from_table"
            )

    def _report(self) -> None:
        """Best effort: a failed write loses only what ``status`` shows."""
        root = self.options.checkpoint_location
        try:
            write_hold_report(
                self.catalog.io_for(root),
                hold_report_location(root, self.options.sink_id),
                self.metrics.snapshot(),
            )
        except Exception as e:
            log.warning(
                "sink %s: held transactions report not written: %s", self.options.sink_id, e
            )


def _collect(df: DataFrame, batch_id: int) -> tuple[pa.Table, list[TransactionMarker]]:
    """The batch's change rows (Arrow, arrival order) and its END events. Two reads of
    the persisted batch, not one ``toArrow`` of every row: the marker rows' null order
    struct has a required child, which Spark's Arrow conversion refuses."""
    from pyspark.sql import functions as F

    df = df.persist()
    try:
        marker = F.col(TRANSACTION_MARKER_COLUMN)
        texts = [r[0] for r in df.where(marker.isNotNull()).select(marker).collect()]
        rows = to_arrow(df.where(marker.isNull()).drop(TRANSACTION_MARKER_COLUMN))
    finally:
        df.unpersist()
    ends = []
    for i, text in enumerate(texts):
        at = f"batch {batch_id}, transaction event {i + 1} of {len(texts)}"
        try:
            value = json.loads(text)
        except ValueError as e:
            raise TransactionMetadataError(f"{at}: not JSON ({e}): {text[:200]!r}") from None
        if not isinstance(value, dict):
            raise TransactionMetadataError(f"{at}: not a JSON object: {text[:200]!r}")
        found = parse_marker(value, at)
        if found.status == "END":
            ends.append(found)
    return rows, ends
