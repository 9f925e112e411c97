"""Sink metrics for Prometheus, through ``prometheus_client``: a collector over the
registered sinks, its text exposition (format 0.0.4) and an HTTP endpoint.

Metric names are Flink's Iceberg sink metric names with the prefix ``stream_sink_``;
every sample carries the labels ``sink`` (sink id) and ``table``:

=====================================================  =======  ==============================
name (after ``stream_sink_``)                          kind     meaning
=====================================================  =======  ==============================
lastCheckpointDurationMs                               gauge    last snapshot_state, ms
lastCommitDurationMs                                   gauge    last table commit, ms
elapsedSecondsSinceLastSuccessfulCommit                gauge    absent before the first commit
commitsInFlight                                        gauge    background commits (pipelined)
lastCommitWaitMs                                       gauge    last wait for the commit in flight
committedDataFilesCount / RecordCount / ByteCount      counter  data files committed
committedDeleteFilesCount / RecordCount / ByteCount    counter  delete files committed
flushedDataFiles / flushedDeleteFiles                  counter  files the writers produced
flushedReferencedDataFiles                             counter  data files position deletes hit
flushedDataFilesRecordCount / ByteCount                counter  rows and bytes of those files
flushedDeleteFilesRecordCount / ByteCount              counter  idem for delete files
lastFlushDurationMs                                    gauge    last micro-batch's write stage
=====================================================  =======  ==============================

Every metric is exposed with Prometheus type ``gauge``, as Flink's own Prometheus reporter
exposes Flink counters: the exposition format requires a counter's samples to end in
``_total``, which would rename Flink's metrics, and these counters restart from zero
when a sink re-opens its committer (a new query, or after an error), as Flink's do when
an operator restarts. ``rate()`` and ``increase()`` work on them all the same.

Sinks register in :data:`REGISTRY` (weakly: a discarded sink disappears) and
:func:`serve` answers ``GET /metrics`` from a daemon thread, on 127.0.0.1 by default.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, ThreadingWSGIServer
from prometheus_client.registry import Collector

from stream_sink.metrics.sink import SinkMetricsSnapshot

PREFIX = "stream_sink_"
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
LABELS = ("sink", "table")
METRICS_PATHS = ("/metrics", "/")
Getter = Callable[[SinkMetricsSnapshot], "float | int | None"]


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: str
    """``counter`` (only grows while a committer is open) or ``gauge``."""
    help: str
    value: Getter


def _c(attr: str) -> Getter:
    return lambda s: None if s.committer is None else getattr(s.committer, attr)


def _w(attr: str) -> Getter:
    return lambda s: getattr(s.writer, attr)


def _m(attr: str) -> Getter:
    return lambda s: None if s.maintenance is None else getattr(s.maintenance, attr)


METRICS: tuple[MetricDef, ...] = (
    MetricDef(
        "lastCheckpointDurationMs",
        "gauge",
        "Duration of the last checkpoint (ms).",
        _c("last_checkpoint_duration_ms"),
    ),
    MetricDef(
        "lastCommitDurationMs",
        "gauge",
        "Duration of the last table commit (ms).",
        _c("last_commit_duration_ms"),
    ),
    MetricDef(
        "elapsedSecondsSinceLastSuccessfulCommit",
        "gauge",
        "Seconds since the last successful table commit.",
        _c("seconds_since_last_successful_commit"),
    ),
    MetricDef(
        "commitsInFlight",
        "gauge",
        "Table commits running in the background (commit_mode='pipelined': 0 or 1).",
        _c("commits_in_flight"),
    ),
    MetricDef(
        "lastCommitWaitMs",
        "gauge",
        "How long the last micro-batch waited for the previous commit (ms, pipelined).",
        _c("last_commit_wait_ms"),
    ),
    MetricDef(
        "committedDataFilesCount", "counter", "Data files committed.", _c("committed_data_files")
    ),
    MetricDef(
        "committedDataFilesRecordCount",
        "counter",
        "Rows in committed data files.",
        _c("committed_records"),
    ),
    MetricDef(
        "committedDataFilesByteCount",
        "counter",
        "Bytes of committed data files.",
        _c("committed_data_bytes"),
    ),
    MetricDef(
        "committedDeleteFilesCount",
        "counter",
        "Delete files committed.",
        _c("committed_delete_files"),
    ),
    MetricDef(
        "committedDeleteFilesRecordCount",
        "counter",
        "Deletes in committed delete files.",
        _c("committed_delete_records"),
    ),
    MetricDef(
        "committedDeleteFilesByteCount",
        "counter",
        "Bytes of committed delete files.",
        _c("committed_delete_bytes"),
    ),
    MetricDef(
        "flushedDataFiles",
        "counter",
        "Data files written by the writers.",
        _w("flushed_data_files"),
    ),
    MetricDef(
        "flushedDeleteFiles",
        "counter",
        "Delete files written by the writers.",
        _w("flushed_delete_files"),
    ),
    MetricDef(
        "flushedReferencedDataFiles",
        "counter",
        "Data files referenced by the position deletes written.",
        _w("flushed_referenced_data_files"),
    ),
    MetricDef(
        "flushedDataFilesRecordCount",
        "counter",
        "Rows in the data files written.",
        _w("flushed_data_records"),
    ),
    MetricDef(
        "flushedDataFilesByteCount",
        "counter",
        "Bytes of the data files written.",
        _w("flushed_data_bytes"),
    ),
    MetricDef(
        "flushedDeleteFilesRecordCount",
        "counter",
        "Deletes in the delete files written.",
        _w("flushed_delete_records"),
    ),
    MetricDef(
        "flushedDeleteFilesByteCount",
        "counter",
        "Bytes of the delete files written.",
        _w("flushed_delete_bytes"),
    ),
    MetricDef(
        "lastFlushDurationMs",
        "gauge",
        "Duration of the last micro-batch's writes (ms).",
        _w("last_flush_duration_ms"),
    ),
    MetricDef(
        "cdcOrderTies",
        "counter",
        "CDC changes whose key and order value equal the previous change's.",
        _w("cdc_order_ties"),
    ),
    MetricDef("maintenanceRuns", "counter", "In-job maintenance runs finished.", _m("runs")),
    MetricDef(
        "maintenanceFailures", "counter", "In-job maintenance runs that failed.", _m("failures")
    ),
    MetricDef(
        "maintenanceConflicts",
        "counter",
        "In-job maintenance commits refused by a concurrent change.",
        _m("conflicts"),
    ),
    MetricDef(
        "maintenanceSkippedLocked",
        "counter",
        "In-job maintenance runs skipped: another maintainer held the table's lock.",
        _m("skipped_locked"),
    ),
    MetricDef(
        "lastMaintenanceDurationMs",
        "gauge",
        "Duration of the last maintenance run (ms).",
        _m("last_duration_ms"),
    ),
    MetricDef(
        "maintenanceConsecutiveFailures",
        "gauge",
        "In-job maintenance runs in a row that did not complete (each retried; 0 once one does).",
        _m("consecutive_failures"),
    ),
    MetricDef(
        "maintenanceRemovedMetadataFiles",
        "counter",
        "Old metadata files (out of the metadata log) the in-job maintenance removed.",
        _m("removed_metadata_files"),
    ),
    MetricDef(
        "maintenanceBacklogRuns",
        "counter",
        "In-job maintenance runs that reached their per-run bound; each brought the next forward.",
        _m("backlog_runs"),
    ),
)


class MetricsSource(Protocol):
    def metrics_snapshot(self) -> SinkMetricsSnapshot: ...


class _SnapshotCollector(Collector):
    """One gauge family per metric, one sample per sink that has a value."""

    def __init__(self, snapshots: Callable[[], Iterable[SinkMetricsSnapshot]]) -> None:
        self._snapshots = snapshots

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snaps = list(self._snapshots())
        for m in METRICS:
            family = GaugeMetricFamily(PREFIX + m.name, m.help, labels=LABELS)
            for s in snaps:
                value = m.value(s)
                if value is not None:
                    family.add_metric((s.sink_id, s.table), float(value))
            yield family


class MetricsRegistry:
    """The sinks whose metrics are exported; thread-safe, holds sinks weakly.
    ``collector_registry`` is the ``prometheus_client`` registry that reads them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: dict[int, weakref.ref[MetricsSource]] = {}
        self.collector_registry = CollectorRegistry(auto_describe=False)
        self.collector_registry.register(_SnapshotCollector(self.snapshots))

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
        return generate_latest(self.collector_registry).decode("utf-8")


REGISTRY = MetricsRegistry()


def render(snapshots: Iterable[SinkMetricsSnapshot]) -> str:
    """The exposition text of ``snapshots``: HELP and TYPE once per metric, then a sample
    per sink; a metric without a value (e.g. no commit yet) has no sample."""
    snaps = list(snapshots)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(lambda: snaps))
    return generate_latest(registry).decode("utf-8")


class MetricsServer:
    """``prometheus_client``'s WSGI app on a threading HTTP server, answering
    ``GET /metrics`` (and ``/``; other paths: 404) from a daemon thread."""

    def __init__(self, host: str, port: int, registry: MetricsRegistry) -> None:
        app = _metrics_path_only(make_wsgi_app(registry.collector_registry))
        self._server = make_server(
            host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"stream-sink-metrics-{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        host = self._server.server_address[0]
        host = host.decode() if isinstance(host, bytes) else str(host)
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


def serve(
    port: int = 0, host: str = "127.0.0.1", registry: MetricsRegistry = REGISTRY
) -> MetricsServer:
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


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


def _metrics_path_only(app: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO", "/") not in METRICS_PATHS:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"only /metrics is served\n"]
        return app(environ, start_response)

    return guarded
