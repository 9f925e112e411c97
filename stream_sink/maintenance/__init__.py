"""Table maintenance: compaction, equality-delete conversion, dangling delete removal,
snapshot expiry, old metadata file removal, orphan file removal, manifest rewriting;
the maintenance lock; and maintenance inside a streaming sink (``MaintenanceOptions``,
``SinkMaintenance``).

Layering: above commit/, write/, read/ and table/, below spark/; no Spark here.
"""

from __future__ import annotations

from stream_sink.maintenance.actions import Maintenance
from stream_sink.maintenance.compaction import FileGroup, RewriteOptions, RewritePlan
from stream_sink.maintenance.in_sink import MaintenanceMetricsSnapshot, SinkMaintenance
from stream_sink.maintenance.lock import MaintenanceLock, MaintenanceLockedError
from stream_sink.maintenance.options import MaintenanceOptions
from stream_sink.maintenance.results import (
    ConvertEqualityDeletesResult,
    ExpireSnapshotsResult,
    RemoveDanglingDeletesResult,
    RemoveMetadataFilesResult,
    RemoveOrphanFilesResult,
    RewriteDataFilesResult,
    RewriteManifestsResult,
)

__all__ = [
    "ConvertEqualityDeletesResult",
    "ExpireSnapshotsResult",
    "FileGroup",
    "Maintenance",
    "MaintenanceLock",
    "MaintenanceLockedError",
    "MaintenanceMetricsSnapshot",
    "MaintenanceOptions",
    "RemoveDanglingDeletesResult",
    "RemoveMetadataFilesResult",
    "RemoveOrphanFilesResult",
    "RewriteDataFilesResult",
    "RewriteManifestsResult",
    "RewriteOptions",
    "RewritePlan",
    "SinkMaintenance",
]
