"""The commit protocol's crash points; the mechanism is :mod:`stream_sink.failpoints`."""

from stream_sink.failpoints import (
    AFTER_CHECKPOINT_METADATA,
    AFTER_DATA_FILES,
    AFTER_METADATA_FILE_WRITE,
    AFTER_PENDING_WRITE,
    AFTER_POSITION_DELETES,
    AFTER_STAGED_WRITE,
    AFTER_STAGING_MANIFESTS,
    AFTER_STATE_CLEANUP,
    AFTER_TABLE_COMMIT,
    BETWEEN_BATCH_COMMITS,
    ENV_VAR,
    FAILPOINTS,
    failpoint,
    parse_failpoints,
    reset_failpoints,
)

__all__ = [
    "AFTER_CHECKPOINT_METADATA",
    "AFTER_DATA_FILES",
    "AFTER_METADATA_FILE_WRITE",
    "AFTER_PENDING_WRITE",
    "AFTER_POSITION_DELETES",
    "AFTER_STAGED_WRITE",
    "AFTER_STAGING_MANIFESTS",
    "AFTER_STATE_CLEANUP",
    "AFTER_TABLE_COMMIT",
    "BETWEEN_BATCH_COMMITS",
    "ENV_VAR",
    "FAILPOINTS",
    "failpoint",
    "parse_failpoints",
    "reset_failpoints",
]
