"""A consistent read across Iceberg tables written by one sink: the snapshot of each
stamped with the same checkpoint (the rule: :mod:`stream_sink.commit.consistent`).

Works on every catalog, per-table ones (Hadoop) too: it needs only each table's
snapshot summaries on the main branch's history, which the sink stamps
(:data:`.watermark.MAX_COMMITTED_CHECKPOINT_ID` under the job and operator ids).
"""

from __future__ import annotations

from collections.abc import Sequence

from stream_sink.exceptions import ValidationError
from stream_sink.table.catalog import Catalog
from stream_sink.table.table import Table

from ..consistent import ConsistentRead, Stamped, choose, routed_operator_id
from .watermark import iter_ancestry, stamp_of


def stamped_snapshots(table: Table, job_id: str, operator_id: str) -> list[Stamped]:
    """(checkpoint id, snapshot id) of every snapshot on main's history that (job,
    operator) stamped, newest first."""
    metadata = table.metadata
    out: list[Stamped] = []
    for snap in iter_ancestry(metadata, metadata.current_snapshot()):
        stamp = stamp_of(snap.summary, job_id, operator_id)
        if stamp is not None:
            out.append((stamp, snap.snapshot_id))
    return out


def consistent_snapshots(
    tables: Sequence[Table], job_id: str, operator_ids: Sequence[str]
) -> ConsistentRead:
    """For each table (committed under the operator id at the same position), the
    snapshot to read so every table shows the same checkpoint of job ``job_id``."""
    if len(tables) != len(operator_ids):
        raise ValidationError("a consistent read needs one operator id per table")
    stamps = {
        t.name: stamped_snapshots(t.refresh(), job_id, o)
        for t, o in zip(tables, operator_ids, strict=True)
    }
    return choose(stamps, {t.name: o for t, o in zip(tables, operator_ids, strict=True)})


def routed_snapshots(
    catalog: Catalog, job_id: str, sink_id: str, table_names: Sequence[str]
) -> ConsistentRead:
    """:func:`consistent_snapshots` of the tables a routed sink (``table_column``) with
    id ``sink_id`` writes, named as its routing values name them."""
    tables = [catalog.load_table(n) for n in table_names]
    return consistent_snapshots(
        tables, job_id, [routed_operator_id(sink_id, n) for n in table_names]
    )
