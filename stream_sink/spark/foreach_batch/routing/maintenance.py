"""In-sink maintenance of a routed sink (``IcebergSink(table_column=..., maintenance=...)``).

Every table the sink writes gets its own :class:`~stream_sink.maintenance.SinkMaintenance`
(its own triggers, counted from its own commits, and its own lock owner
``sink:<sink id>=<table>``), built on the one-table API unchanged. What the routed sink
adds is the schedule:

- After each checkpoint, the tables it committed are noted (with the metadata their
  commits produced), oldest note first.
- Unless a run of some table is under way, the noted tables are offered to their
  triggers in that order; the first that is due starts its run, and the tables offered
  before it (not due) are dropped from the notes (their commits are counted). At most
  one run starts per micro-batch.

Invariants (the bound):
- One maintenance run per sink at a time, whatever the number of tables: a table that
  comes due while another table's run is under way waits for a later micro-batch
  (oldest first), so no table waits for more runs than there are tables due before it.
- A micro-batch starts at most one run. With ``background=True`` (the default) the run
  is on a driver thread and the micro-batch does not wait for it; with
  ``background=False`` the micro-batch waits for that one table's run and no other.
- As for one table: failures and conflicts are logged and counted, never raised into
  the stream; files a table's committer holds uncommitted are protected from orphan
  removal; the per-table objects outlive a restore, so a run under way is never doubled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from stream_sink.maintenance import MaintenanceMetricsSnapshot, MaintenanceOptions, SinkMaintenance
from stream_sink.maintenance.lease_lock import sink_lock_location
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.metadata import TableMetadata


class RoutedMaintenance:
    """The maintenance of every table of one routed sink (see the module docstring)."""

    def __init__(
        self,
        catalog: Catalog,
        options: MaintenanceOptions,
        sink_id: str,
        checkpoint_location: str | None = None,
    ) -> None:
        """``checkpoint_location``: the sink's; a table whose maintenance lock needs a
        location and names none gets one beside it (``adopt_lock_location``)."""
        self._catalog = catalog
        self.options = options
        self._sink_id = sink_id
        self._lock_location = (
            None
            if checkpoint_location is None
            else sink_lock_location(checkpoint_location, sink_id)
        )
        self._tables: dict[str, SinkMaintenance] = {}
        self._noted: dict[str, TableMetadata] = {}

    def open_table(self, name: str, protected: Callable[[], frozenset[str]]) -> None:
        """Take table ``name`` in (again after a restore: ``protected`` names the files its
        new committer holds uncommitted)."""
        m = self._tables.get(name)
        if m is None:
            catalog = self._catalog
            m = SinkMaintenance(
                lambda: catalog.load_table(name),
                self.options,
                f"sink:{self._sink_id}={name}",
                lock_location=self._lock_location,
            )
            self._tables[name] = m
        m.protect(protected)

    @property
    def running(self) -> str | None:
        """The table whose run is under way, if any."""
        return next((n for n, m in self._tables.items() if m.running), None)

    def after_checkpoint(self, committed: Mapping[str, TableMetadata]) -> str | None:
        """Note ``committed`` (table → metadata after its commits), then start at most one
        due run; returns the table whose run started."""
        for name, metadata in committed.items():
            self._noted[name] = metadata  # a noted table keeps its place
        if self.running is not None:
            return None
        for name in list(self._noted):
            metadata = self._noted.pop(name)
            m = self._tables.get(name)
            if m is not None and m.after_commit(metadata):
                return name
        return None

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the run under way (``close``)."""
        for m in self._tables.values():
            m.wait(timeout)

    @property
    def metrics_by_table(self) -> dict[str, MaintenanceMetricsSnapshot]:
        return {n: m.metrics for n, m in sorted(self._tables.items())}

    @property
    def metrics(self) -> MaintenanceMetricsSnapshot:
        """The sum over the tables of what is counted; the worst table's failure streak
        (failing when any table is); the last success: the latest of any table's; the last
        duration and error: of the last table (by name) that has one."""
        total = MaintenanceMetricsSnapshot()
        latest = ("last_duration_ms", "last_error")
        counted = [
            f.name
            for f in dataclasses.fields(MaintenanceMetricsSnapshot)
            if f.type in (int, "int") and f.name != "consecutive_failures"
        ]
        for m in self.metrics_by_table.values():
            total = dataclasses.replace(
                total,
                **{k: getattr(total, k) + getattr(m, k) for k in counted},
                **{k: getattr(m, k) or getattr(total, k) for k in latest},
                consecutive_failures=max(total.consecutive_failures, m.consecutive_failures),
                failing=total.failing or m.failing,
                last_success_ms=max(
                    (t for t in (total.last_success_ms, m.last_success_ms) if t is not None),
                    default=None,
                ),
            )
        return total
