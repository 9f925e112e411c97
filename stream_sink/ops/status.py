"""Where a running (or stopped) sink is: read from its checkpoint location and table.

Sources, all read-only (safe while the query runs):
- ``<checkpoint location>/spark/``: Spark's query id (``metadata``), the batches it
  planned (``offsets/``) and the batches whose ``foreachBatch`` returned (``commits/``).
- ``<checkpoint location>/<sink id>/chk-<id>``: the sink's completed checkpoints.
- the table's snapshot summaries: the watermark, the highest batch id committed by
  (query id, sink id) on the branch.

Invariants: a batch Spark acknowledged (in ``commits/``) above the watermark is durable in
the sink's state but not yet in the table: *staged* when a completed checkpoint covers
it (committed at the next commit attempt), else *pending* (waiting for its checkpoint).
Batches planned but not acknowledged are in flight: Spark runs them (again) next.
"""

from __future__ import annotations

from dataclasses import dataclass

from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit.watermark import committed_watermark, iter_ancestry, stamp_of
from stream_sink.exceptions import (
    CheckpointError,
    InvalidOptionError,
    NotFoundError,
    ValidationError,
)
from stream_sink.io import FileIO
from stream_sink.spark import query
from stream_sink.spark.options import SPARK_CHECKPOINT_DIR, resolve_location
from stream_sink.table.catalog import Catalog
from stream_sink.table.operations import branch_head
from stream_sink.table.snapshots import MAIN_BRANCH


@dataclass(frozen=True)
class LastCommit:
    snapshot_id: int
    timestamp_ms: int
    watermark: int


@dataclass(frozen=True)
class SinkStatus:
    """One sink's progress; ``watermark`` is None when its table could not be read
    (``table_error`` says why)."""

    checkpoint_location: str
    sink_id: str
    table: str
    query_id: str
    watermark: int | None
    table_error: str | None
    last_commit: LastCommit | None
    last_checkpoint_id: int | None
    acknowledged: tuple[int, ...]
    planned: tuple[int, ...]
    staged: tuple[int, ...]
    pending: tuple[int, ...]

    @property
    def offsets_ahead(self) -> int | None:
        """How many batches Spark's offset log is ahead of the watermark."""
        if self.watermark is None or not self.planned:
            return None
        return max(0, self.planned[-1] - self.watermark)

    @property
    def in_flight(self) -> tuple[int, ...]:
        done = set(self.acknowledged)
        return tuple(
            b
            for b in self.planned
            if b not in done and (self.watermark is None or b > self.watermark)
        )


def sink_status(
    checkpoint_location: str,
    catalog: Catalog | None,
    *,
    sink_id: str | None = None,
    table: str | None = None,
    branch: str = MAIN_BRANCH,
) -> SinkStatus:
    """The status of the sink checkpointing under ``checkpoint_location``."""
    root = resolve_location(checkpoint_location)
    # the catalog's storage properties (s3.endpoint, keys) serve its checkpoints too
    io = catalog.io_for(root) if catalog is not None else FileIO.for_location(root)
    spark_dir = f"{root}/{SPARK_CHECKPOINT_DIR}"
    if not io.exists(root):
        raise NotFoundError(
            f"checkpoint location {root!r} does not exist; check "
            "--checkpoint-location (IcebergSink's checkpoint_location)"
        )
    try:
        query_id = query.read_query_id(spark_dir, io)
    except CheckpointError:
        raise CheckpointError(
            f"no streaming query has checkpointed at {spark_dir}: is "
            f"{root!r} a sink's checkpoint_location?"
        ) from None
    sink = sink_id or _only_sink(root, io)
    checkpoints = CheckpointStorage(root, sink, io).list_completed()
    table_name = table or sink
    watermark, error, last = _table_watermark(catalog, table_name, query_id, sink, branch)
    acknowledged = tuple(query.acknowledged_batch_ids(spark_dir, io))
    floor = watermark if watermark is not None else -1
    covered = {
        b
        for c in checkpoints
        if c.checkpoint_id > floor
        for b in range(c.metadata.first_batch_id, c.checkpoint_id + 1)
    }
    unseen = [b for b in acknowledged if b > floor]
    return SinkStatus(
        checkpoint_location=root,
        sink_id=sink,
        table=table_name,
        query_id=query_id,
        watermark=watermark,
        table_error=error,
        last_commit=last,
        last_checkpoint_id=checkpoints[-1].checkpoint_id if checkpoints else None,
        acknowledged=acknowledged,
        planned=tuple(query.planned_batch_ids(spark_dir, io)),
        staged=tuple(b for b in unseen if b in covered),
        pending=tuple(b for b in unseen if b not in covered),
    )


def _only_sink(root: str, io: FileIO) -> str:
    """The one sink id checkpointing under ``root`` (its sub-directory other than
    Spark's); InvalidOptionError when there are several, NotFoundError when none."""
    names = [loc.rstrip("/").rsplit("/", 1)[-1] for loc in io.list_dir(root)]
    sinks = [n for n in names if n != SPARK_CHECKPOINT_DIR and not n.startswith(".")]
    if len(sinks) == 1:
        return sinks[0]
    if not sinks:
        raise NotFoundError(
            f"no sink has completed a checkpoint under {root!r} yet; pass "
            "--sink-id (default: the table name) to read its table anyway"
        )
    raise InvalidOptionError(
        f"several sinks checkpoint under {root!r}: {', '.join(sinks)}; pass --sink-id"
    )


def _table_watermark(
    catalog: Catalog | None, table: str, query_id: str, sink: str, branch: str
) -> tuple[int | None, str | None, LastCommit | None]:
    if catalog is None:
        return None, "no catalog given", None
    try:
        loaded = catalog.load_table(table)
    except (NotFoundError, ValidationError) as e:
        return None, f"{e} (pass --table, --warehouse or --catalog-uri)", None
    meta = loaded.metadata
    head = branch_head(meta, branch)
    mark = committed_watermark(meta, query_id, sink, branch)
    for snap in iter_ancestry(meta, head):
        stamp = stamp_of(snap.summary, query_id, sink)
        if stamp is not None:
            return mark, None, LastCommit(snap.snapshot_id, snap.timestamp_ms, stamp)
    return mark, None, None
