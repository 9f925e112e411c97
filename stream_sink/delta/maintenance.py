"""In-sink maintenance of a Delta table: bounded compaction and vacuum between commits.

A long CDC stream into Delta adds files every batch (its MERGE rewrites and its inserts)
and tombstones every file it rewrites: the log stays bounded by checkpoints and log
cleanup (:mod:`.expired_logs`), the data folder does not. ``DeltaSink(maintenance=
DeltaMaintenanceOptions(...))`` runs, after a commit whose version is a multiple of
``every_versions`` (or of half of it while the previous run left work behind):

1. compaction of small files (:func:`.optimize.optimize`, ``dataChange=false``), at
   most ``max_compacted_files`` files per run;
2. vacuum of files removed longer ago than ``delta.deletedFileRetentionDuration``
   (:func:`.vacuum.vacuum`), at most ``max_vacuumed_files`` per run.

Why between the sink's commits (on the committing thread) rather than racing them in
the background: the sink's copy-on-write MERGE removes the files it rewrites, and a
compaction that removed one of them in between would make the MERGE conflict and the
micro-batch fail; run between commits, the two never race, each run's work is bounded
(its time is added to that micro-batch only), and the trigger needs no state, so it
works the same when every micro-batch opens a new sink (the ``format("stream_sink")``
route). A run that fails (a conflict with another writer) is logged and counted; the
next due version tries again. Nothing here ever fails the stream.

Both front doors call :func:`after_commit` after each of their commits; the metrics
(and whether the last run left work behind, which halves the interval) live in the
sink (``DeltaSink.maintenance_metrics``) or, where each commit runs in a fresh worker
(the Data Source route), in a small JSON report beside the sink's checkpoints
(:func:`read_report`, :func:`write_report`), which every commit reads and rewrites.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from stream_sink.exceptions import InvalidOptionError
from stream_sink.io.fileio import FileIO

from .optimize import DEFAULT_TARGET_FILE_BYTES, optimize
from .table import DeltaTable
from .vacuum import vacuum

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeltaMaintenanceOptions:
    every_versions: int = 10
    compact: bool = True
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    min_input_files: int = 5
    max_compacted_files: int = 200
    vacuum: bool = True
    max_vacuumed_files: int = 1000

    def __post_init__(self) -> None:
        for name in ("every_versions", "target_file_bytes", "min_input_files"):
            if getattr(self, name) < 1:
                raise InvalidOptionError(f"DeltaMaintenanceOptions.{name} must be >= 1")
        if self.max_compacted_files < 2 or self.max_vacuumed_files < 1:
            raise InvalidOptionError(
                "DeltaMaintenanceOptions: max_compacted_files must be >= 2 and "
                "max_vacuumed_files >= 1"
            )


@dataclass
class DeltaMaintenanceMetrics:
    runs: int = 0
    failures: int = 0
    compacted_files: int = 0
    vacuumed_files: int = 0
    backlog_runs: int = 0
    last_error: str | None = None
    backlog: bool = False
    """The last run left work behind: runs come every half ``every_versions`` until one
    does not."""


def due(version: int, options: DeltaMaintenanceOptions, backlog: bool) -> bool:
    """Whether the commit of ``version`` runs maintenance (every ``every_versions``, or
    every half of that while a backlog is left)."""
    every = max(1, options.every_versions // 2) if backlog else options.every_versions
    return version > 0 and version % every == 0


def after_commit(
    table: DeltaTable, options: DeltaMaintenanceOptions, metrics: DeltaMaintenanceMetrics
) -> bool:
    """After a commit through ``table``: a bounded run when the version just committed
    makes one due (:func:`due`). True when a run was started. Never raises: the batch is
    committed, and a failure is counted in ``metrics`` and retried at the next due version."""
    try:
        if not due(table.refresh().version, options, metrics.backlog):
            return False
        metrics.backlog = run(table, options, metrics)
    except Exception as e:  # never fail the stream
        metrics.failures += 1
        metrics.last_error = f"{type(e).__name__}: {e}"
        log.warning("Delta maintenance of %s failed: %s", table.location, metrics.last_error)
    return True


def run(
    table: DeltaTable, options: DeltaMaintenanceOptions, metrics: DeltaMaintenanceMetrics
) -> bool:
    """One bounded run; True when it left work behind. Errors are counted, never raised."""
    backlog = False
    metrics.runs += 1
    for enabled, name, action in (
        (options.compact, "compaction", lambda: _compact(table, options, metrics)),
        (options.vacuum, "vacuum", lambda: _vacuum(table, options, metrics)),
    ):
        if not enabled:
            continue
        try:
            backlog |= action()
        except Exception as e:  # never fail the stream
            metrics.failures += 1
            metrics.last_error = f"{name}: {type(e).__name__}: {e}"
            log.warning("Delta maintenance of %s: %s", table.location, metrics.last_error)
    metrics.backlog_runs += int(backlog)
    return backlog


def _compact(
    table: DeltaTable, options: DeltaMaintenanceOptions, metrics: DeltaMaintenanceMetrics
) -> bool:
    r = optimize(
        table,
        target_bytes=options.target_file_bytes,
        min_input_files=options.min_input_files,
        max_files=options.max_compacted_files,
    )
    metrics.compacted_files += r.removed_files
    return r.remaining_files > 0


def _vacuum(
    table: DeltaTable, options: DeltaMaintenanceOptions, metrics: DeltaMaintenanceMetrics
) -> bool:
    r = vacuum(table, max_files=options.max_vacuumed_files)
    metrics.vacuumed_files += r.deleted_files
    return r.remaining_files > 0


REPORT_FIELDS = ("compacted_files", "vacuumed_files")
"""Fields only a Delta sink's report has: what tells it from an Iceberg sink's report,
which has the same name and place (``stream-sink status`` reads either)."""


def metrics_from_report(doc: Mapping[str, Any]) -> DeltaMaintenanceMetrics | None:
    """The metrics in a report's JSON object when a Delta sink wrote it (it has
    :data:`REPORT_FIELDS`); None for an Iceberg sink's report or one that does not fit."""
    if not all(k in doc for k in REPORT_FIELDS):
        return None
    try:
        return _metrics_of(doc)
    except TypeError:
        return None


def _metrics_of(doc: Mapping[str, Any]) -> DeltaMaintenanceMetrics:
    """The metrics of a report's JSON object, unknown keys ignored (TypeError when a
    field does not fit)."""
    known = {f.name for f in fields(DeltaMaintenanceMetrics)}
    return DeltaMaintenanceMetrics(**{k: v for k, v in doc.items() if k in known})


def read_report(io: FileIO, location: str) -> DeltaMaintenanceMetrics:
    """The metrics last written at ``location``; zeros when there are none (or they
    cannot be read: the report only counts, it never stops maintenance)."""
    try:
        if not io.exists(location):
            return DeltaMaintenanceMetrics()
        raw = json.loads(io.read_bytes(location).decode("utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        return _metrics_of(raw)
    except (OSError, ValueError, TypeError) as e:
        log.warning("Delta maintenance report %s unreadable, counting from zero: %s", location, e)
        return DeltaMaintenanceMetrics()


def write_report(io: FileIO, location: str, metrics: DeltaMaintenanceMetrics) -> None:
    """Replace the report at ``location`` atomically (a reader sees a whole one)."""
    io.write_atomic(location, json.dumps(asdict(metrics)).encode("utf-8"), fsync=False)
