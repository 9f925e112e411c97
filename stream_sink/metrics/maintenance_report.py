"""The in-sink maintenance's metrics as a small JSON file beside the sink's checkpoints
(``<checkpoint location>/<sink id>/maintenance.json``), for ``stream-sink status``.

A sink whose every commit runs in a fresh process (the ``format("stream_sink")``
route) also keeps its maintenance triggers' state there, under ``trigger``
(:func:`read_report_and_trigger`), so the next commit resumes counting where the last one stopped;
readers of the metrics ignore it.

Invariants: the file is replaced atomically (a reader sees a whole report or the
previous one); a report that cannot be read is reported as absent, never raised.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from stream_sink.io import FileIO
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot

log = logging.getLogger(__name__)

REPORT_FILE = "maintenance.json"
TRIGGER_KEY = "trigger"
"""The triggers' saved state, beside the metrics (absent when the sink keeps it in memory)."""


def report_location(checkpoint_location: str, sink_id: str) -> str:
    return f"{checkpoint_location.rstrip('/')}/{sink_id}/{REPORT_FILE}"


def write_report(
    io: FileIO,
    location: str,
    metrics: MaintenanceMetricsSnapshot,
    *,
    trigger: Mapping[str, Any] | None = None,
) -> None:
    """Replace the report at ``location``: ``metrics``, and ``trigger`` when given."""
    doc: dict[str, Any] = asdict(metrics)
    if trigger is not None:
        doc[TRIGGER_KEY] = dict(trigger)
    io.write_atomic(location, json.dumps(doc).encode("utf-8"), fsync=False)


def read_report(io: FileIO, location: str) -> MaintenanceMetricsSnapshot | None:
    """The last report written at ``location``; None when there is none (or unreadable)."""
    return read_report_and_trigger(io, location)[0]


def read_report_and_trigger(
    io: FileIO, location: str
) -> tuple[MaintenanceMetricsSnapshot | None, dict[str, Any] | None]:
    """The report at ``location`` (as :func:`read_report`) and the triggers' state saved
    with it (None when there is none: no report, an unreadable one, or one written
    without it), from one read."""
    raw = read_report_doc(io, location)
    if raw is None:
        return None, None
    metrics = metrics_of(raw, location)
    if metrics is None:
        return None, None
    trigger = raw.get(TRIGGER_KEY)
    return metrics, trigger if isinstance(trigger, dict) else None


def metrics_of(doc: Mapping[str, Any], location: str) -> MaintenanceMetricsSnapshot | None:
    """The metrics of a report read by :func:`read_report_doc` (None, logged, when its
    fields do not fit: a report of another version)."""
    known = {f.name for f in fields(MaintenanceMetricsSnapshot)}
    try:
        return MaintenanceMetricsSnapshot(**{k: v for k, v in doc.items() if k in known})
    except TypeError as e:
        log.warning("maintenance report %s unreadable: %s", location, e)
        return None


def read_report_doc(io: FileIO, location: str) -> dict[str, Any] | None:
    """The report at ``location`` as its JSON object, whichever sink wrote it (a Delta
    sink writes its own fields here: :mod:`stream_sink.delta.maintenance`); None when
    there is none or it cannot be read (logged)."""
    try:
        if not io.exists(location):
            return None
        raw = json.loads(io.read_bytes(location).decode("utf-8"))
    except (OSError, ValueError, TypeError) as e:
        log.warning("maintenance report %s unreadable: %s", location, e)
        return None
    if not isinstance(raw, dict):
        log.warning("maintenance report %s unreadable: not a JSON object", location)
        return None
    return raw
