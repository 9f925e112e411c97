"""Metadata-only commits (schema and partition-spec changes): no new snapshot.

Invariants:
- Every attempt refreshes the table and computes the new metadata from what it read;
  the catalog's compare-and-swap then makes the commit succeed only if the table is
  still at that metadata (so the current schema and spec ids are unchanged since the
  change was computed). A lost race is retried per ``commit.retry.*``; an unknown
  outcome is raised as is.
- ``change`` returning None means "nothing to change": nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable

from stream_sink.table.commit_lock import commit_lock
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.retry import RetryPolicy
from stream_sink.table.table import Table

MetadataChange = Callable[[TableMetadata], "TableMetadata | None"]


def commit_metadata_change(table: Table, change: MetadataChange) -> TableMetadata:
    """Commit ``change(current metadata)``; returns the table's metadata afterwards."""

    def attempt(_: int) -> TableMetadata:
        with commit_lock(table.location):
            return locked()

    def locked() -> TableMetadata:
        t = table.refresh()
        base = t.metadata
        new = change(base)
        if new is None:
            return base
        location, committed = t.catalog.commit_metadata(
            t.identifier, t.metadata_location, new, base_metadata=base
        )
        t.record_commit(committed, location)
        return committed

    return RetryPolicy.from_properties(table.properties).run(attempt)
