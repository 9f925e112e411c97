"""The in-sink maintenance's metrics as a small JSON file beside the sink's checkpoints
(``<checkpoint location>/<sink id>/maintenance.json``), for ``stream-sink status``.

Invariants: the file is replaced atomically (a reader sees a whole report or the
previous one); a report that cannot be read is reported as absent, never raised.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, fields

from stream_sink.io import FileIO
from stream_sink.metrics.sink import MaintenanceMetricsSnapshot

log = logging.getLogger(__name__)

REPORT_FILE = "maintenance.json"


def report_location(checkpoint_location: str, sink_id: str) -> str:
    return f"{checkpoint_location.rstrip('/')}/{sink_id}/{REPORT_FILE}"


def write_report(io: FileIO, location: str, metrics: MaintenanceMetricsSnapshot) -> None:
    io.write_atomic(location, json.dumps(asdict(metrics)).encode("utf-8"), fsync=False)


def read_report(io: FileIO, location: str) -> MaintenanceMetricsSnapshot | None:
    """The last report written at ``location``; None when there is none (or unreadable)."""
    try:
        if not io.exists(location):
            return None
        raw = json.loads(io.read_bytes(location).decode("utf-8"))
        known = {f.name for f in fields(MaintenanceMetricsSnapshot)}
        return MaintenanceMetricsSnapshot(**{k: v for k, v in raw.items() if k in known})
    except (OSError, ValueError, TypeError) as e:
        log.warning("maintenance report %s unreadable: %s", location, e)
        return None
