"""In-sink maintenance for a sink whose every commit runs in a process that ends with it
(the ``format("stream_sink")`` route: Spark runs each micro-batch's commit in a fresh
Python worker).

:class:`~.in_sink.SinkMaintenance` keeps its triggers' counts and its metrics in memory
across commits and runs in a background thread. Neither survives such a commit, so
:func:`maintain_after_commit` builds a ``SinkMaintenance`` for one commit from what the
previous commit saved in the sink's report file (``<checkpoint location>/<sink id>/
maintenance.json``: the metrics ``stream-sink status`` reads, and the triggers' state
under ``trigger``), runs what is due in the foreground (``background=False``), and
saves both back (atomic replace). The triggers, the lock and ``adopt_lock_location``,
the bounded runs, the backlog, retries and ``failing`` are ``SinkMaintenance``'s own.

Invariants:
- Every commit saves the triggers' state, run or not (each commit counts the new
  snapshots up to the head it saw, ``TriggerState.observe``), so no snapshot is counted
  twice and a trigger fires after the same commits as in a long-lived sink.
- A report missing or unreadable starts from zero (the first commit counts the table's
  history, as a sink does when it starts); a process killed during a run leaves the
  previous report, so the next commit finds the run still due, and takes back the lease
  the killed run held (the same ``owner``).
- A failed run is counted in the saved metrics and retried as ``SinkMaintenance``
  retries; only a report that cannot be written raises (the caller logs it: the commit
  it follows is already durable).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from stream_sink.io.fileio import FileIO
from stream_sink.maintenance.in_sink import SinkMaintenance
from stream_sink.maintenance.options import MaintenanceOptions
from stream_sink.maintenance.triggers import TriggerState
from stream_sink.metrics.maintenance_report import read_report_and_trigger, write_report
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.table import Table


@dataclass(frozen=True)
class CommitMaintenance:
    """What one commit's maintenance did: whether a run was due (and ran), the metrics
    after it."""

    ran: bool
    metrics: MaintenanceMetricsSnapshot


def maintain_after_commit(
    load_table: Callable[[], Table],
    metadata: TableMetadata,
    options: MaintenanceOptions,
    *,
    owner: str,
    io: FileIO,
    report: str,
    lock_location: str | None,
    protected: frozenset[str] = frozenset(),
    clock: Callable[[], float] = time.time,
) -> CommitMaintenance:
    """Count the commit that left ``metadata`` and run ``options``' maintenance in the
    calling thread when due, resuming from and saving to the report at ``report``
    (see the module docstring). ``owner`` names the lock's holder, stable per sink;
    ``protected`` names files the sink holds uncommitted."""
    foreground = dataclasses.replace(options, background=False)
    metrics, trigger = read_report_and_trigger(io, report)
    maintenance = SinkMaintenance(
        load_table,
        foreground,
        owner,
        lambda: protected,
        clock,
        lock_location=lock_location,
        trigger=TriggerState.restored(foreground, trigger, int(clock() * 1000)),
        metrics=metrics,
    )
    ran = maintenance.after_commit(metadata)
    after = maintenance.metrics
    write_report(io, report, after, trigger=maintenance.trigger_state.saved())
    return CommitMaintenance(ran, after)
