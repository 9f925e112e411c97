"""Sink metrics in Prometheus' text exposition format (0.0.4), served over HTTP.

Metric names are Flink's Iceberg sink metric names with the prefix ``stream_sink_``;
every sample carries the labels ``sink`` (sink id) and ``table``:

=====================================================  =======  ==============================
name (after ``stream_sink_``)                          type     meaning
=====================================================  =======  ==============================
lastCheckpointDurationMs                               gauge    last snapshot_state, ms
lastCommitDurationMs                                   gauge    last table commit, ms
elapsedSecondsSinceLastSuccessfulCommit                gauge    absent before the first commit
committedDataFilesCount / RecordCount / ByteCount      counter  data files committed
committedDeleteFilesCount / RecordCount / ByteCount    counter  delete files committed
flushedDataFiles / flushedDeleteFiles                  counter  files the writers produced
flushedReferencedDataFiles                             counter  data files position deletes hit
flushedDataFilesRecordCount / ByteCount                counter  rows and bytes of those files
flushedDeleteFilesRecordCount / ByteCount              counter  idem for delete files
lastFlushDurationMs                                    gauge    last micro-batch's write stage
=====================================================  =======  ==============================

Committed counters restart from zero when a sink re-opens its committer (a new query,
or after an error), as Flink's do when an operator restarts.

Sinks register in :data:`REGISTRY` (weakly: a discarded sink disappears) and
:func:`serve` answers ``GET /metrics`` from a daemon thread, on 127.0.0.1 by default.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol

from stream_sink.metrics.sink import SinkMetricsSnapshot

PREFIX = "stream_sink_"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Getter = Callable[[SinkMetricsSnapshot], "float | int | None"]


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: str
    help: str
    value: Getter


def _c(attr: str) -> Getter:
    return lambda s: None if s.committer is None else getattr(s.committer, attr)


def _w(attr: str) -> Getter:
    return lambda s: getattr(s.writer, attr)


METRICS: tuple[MetricDef, ...] = (
    MetricDef("lastCheckpointDurationMs", "gauge", "Duration of the last checkpoint (ms).",
              _c("last_checkpoint_duration_ms")),
    MetricDef("lastCommitDurationMs", "gauge", "Duration of the last table commit (ms).",
              _c("last_commit_duration_ms")),
    MetricDef("elapsedSecondsSinceLastSuccessfulCommit", "gauge",
              "Seconds since the last successful table commit.",
              _c("seconds_since_last_successful_commit")),
    MetricDef("committedDataFilesCount", "counter", "Data files committed.",
              _c("committed_data_files")),
    MetricDef("committedDataFilesRecordCount", "counter", "Rows in committed data files.",
              _c("committed_records")),
    MetricDef("committedDataFilesByteCount", "counter", "Bytes of committed data files.",
              _c("committed_data_bytes")),
    MetricDef("committedDeleteFilesCount", "counter", "Delete files committed.",
              _c("committed_delete_files")),
    MetricDef("committedDeleteFilesRecordCount", "counter", "Deletes in committed delete files.",
              _c("committed_delete_records")),
    MetricDef("committedDeleteFilesByteCount", "counter", "Bytes of committed delete files.",
              _c("committed_delete_bytes")),
    MetricDef("flushedDataFiles", "counter", "Data files written by the writers.",
              _w("flushed_data_files")),
    MetricDef("flushedDeleteFiles", "counter", "Delete files written by the writers.",
              _w("flushed_delete_files")),
    MetricDef("flushedReferencedDataFiles", "counter",
              "Data files referenced by the position deletes written.",
              _w("flushed_referenced_data_files")),
    MetricDef("flushedDataFilesRecordCount", "counter", "Rows in the data files written.",
              _w("flushed_data_records")),
    MetricDef("flushedDataFilesByteCount", "counter", "Bytes of the data files written.",
              _w("flushed_data_bytes")),
    MetricDef("flushedDeleteFilesRecordCount", "counter", "Deletes in the delete files written.",
              _w("flushed_delete_records")),
    MetricDef("flushedDeleteFilesByteCount", "counter", "Bytes of the delete files written.",
              _w("flushed_delete_bytes")),
    MetricDef("lastFlushDurationMs", "gauge", "Duration of the last micro-batch's writes (ms).",
              _w("last_flush_duration_ms")),
)  # fmt: skip


class MetricsSource(Protocol):
    def metrics_snapshot(self) -> SinkMetricsSnapshot: ...


class MetricsRegistry:
    """The sinks whose metrics are exported; thread-safe, holds sinks weakly."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: dict[int, weakref.ref[MetricsSource]] = {}

    def register(self, source: MetricsSource) -> None:
        with self._lock:
            self._sources[id(source)] = weakref.ref(source)

    def unregister(self, source: MetricsSource) -> None:
        with self._lock:
            self._sources.pop(id(source), None)

    def snapshots(self) -> list[SinkMetricsSnapshot]:
        with self._lock:
            refs = list(self._sources.items())
        out = []
        for key, ref in refs:
            source = ref()
            if source is None:
                with self._lock:
                    self._sources.pop(key, None)
                continue
            out.append(source.metrics_snapshot())
        return sorted(out, key=lambda s: (s.sink_id, s.table))

    def render(self) -> str:
        return render(self.snapshots())


REGISTRY = MetricsRegistry()


def render(snapshots: Iterable[SinkMetricsSnapshot]) -> str:
    """The exposition text of ``snapshots``: HELP and TYPE once per metric, then a sample
    per sink; a metric without a value (e.g. no commit yet) has no sample."""
    snaps = list(snapshots)
    lines: list[str] = []
    for m in METRICS:
        name = PREFIX + m.name
        lines.append(f"# HELP {name} {m.help}")
        lines.append(f"# TYPE {name} {m.kind}")
        for s in snaps:
            value = m.value(s)
            if value is not None:
                labels = f'sink="{_escape(s.sink_id)}",table="{_escape(s.table)}"'
                lines.append(f"{name}{{{labels}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


class MetricsServer:
    """An HTTP server answering ``GET /metrics`` from a daemon thread."""

    def __init__(self, host: str, port: int, registry: MetricsRegistry) -> None:
        handler = _handler(registry)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"stream-sink-metrics-{port}", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._server.server_address[0])
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with _servers_lock:
            for key, server in list(_servers.items()):
                if server is self:
                    del _servers[key]


_servers: dict[tuple[str, int], MetricsServer] = {}
_servers_lock = threading.Lock()


def serve(port: int = 0, host: str = "127.0.0.1",
          registry: MetricsRegistry = REGISTRY) -> MetricsServer:  # fmt: skip
    """Serve ``registry`` on ``host:port`` (0: a free port); the same server when this
    process already serves that address."""
    with _servers_lock:
        server = _servers.get((host, port)) if port else None
        if server is None:
            server = MetricsServer(host, port, registry)
            _servers[(host, server.port)] = server
            if port:
                _servers[(host, port)] = server
        return server


def _handler(registry: MetricsRegistry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics is served")
                return
            body = registry.render().encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

    return Handler
