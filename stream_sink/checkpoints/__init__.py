"""Checkpoints: when to take one (coordinator) and where completed ones live (storage)."""

from __future__ import annotations

from stream_sink.checkpoints.coordinator import CheckpointConfig, CheckpointCoordinator
from stream_sink.checkpoints.metadata import (
    CHECKPOINT_FORMAT_VERSION,
    CheckpointMetadata,
    CompletedCheckpoint,
    TableIdentity,
)
from stream_sink.checkpoints.storage import METADATA_FILE, CheckpointStorage

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "METADATA_FILE",
    "CheckpointConfig",
    "CheckpointCoordinator",
    "CheckpointMetadata",
    "CheckpointStorage",
    "CompletedCheckpoint",
    "TableIdentity",
]
