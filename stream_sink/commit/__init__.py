"""The commit stage: FilesCommitter, staging manifests, watermark and failpoints."""

from __future__ import annotations

from stream_sink.commit.committer import DEFAULT_MAX_CONTINUOUS_EMPTY_COMMITS, FilesCommitter
from stream_sink.commit.failpoints import FAILPOINTS, failpoint, reset_failpoints
from stream_sink.commit.iceberg_target import IcebergTarget
from stream_sink.commit.staging import (
    DeltaManifests,
    deserialize_delta_manifests,
    read_staged_files,
    serialize_delta_manifests,
)
from stream_sink.commit.state_recovery import StateDirectory
from stream_sink.commit.target import BatchFiles, CommitTarget
from stream_sink.commit.watermark import (
    JOB_ID,
    MANIFESTS_LOCATION,
    MAX_COMMITTED_CHECKPOINT_ID,
    MAX_CONTINUOUS_EMPTY_COMMITS,
    OPERATOR_ID,
    committed_watermark,
)
from stream_sink.metrics.committer import CommitterMetricsSnapshot

__all__ = [
    "DEFAULT_MAX_CONTINUOUS_EMPTY_COMMITS",
    "FAILPOINTS",
    "JOB_ID",
    "MANIFESTS_LOCATION",
    "MAX_COMMITTED_CHECKPOINT_ID",
    "MAX_CONTINUOUS_EMPTY_COMMITS",
    "OPERATOR_ID",
    "BatchFiles",
    "CommitTarget",
    "CommitterMetricsSnapshot",
    "DeltaManifests",
    "FilesCommitter",
    "IcebergTarget",
    "StateDirectory",
    "committed_watermark",
    "deserialize_delta_manifests",
    "failpoint",
    "read_staged_files",
    "reset_failpoints",
    "serialize_delta_manifests",
]
