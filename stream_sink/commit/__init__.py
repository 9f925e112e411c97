"""The commit stage: the format-agnostic protocol at this level, a target per table format
below it.

- at this level: the ``FilesCommitter`` (``committer.py``), the one driver of its
  protocol (``driver.py``), when phase 2 runs (``schedule.py``), commit shapes, the
  target interface (``target.py``), the committer's state, loss and identity checks,
  failpoints; none of them imports a table format;
- ``iceberg/``: the Iceberg target (``target.py``), its staging manifests, table commits
  and summary watermark;
- ``delta/``: the Delta Lake target (``target.py``), with its ``txn`` watermark;
- ``transactions/``: source transactions held until complete (no table format).

The Iceberg names below are loaded on first use, so importing the protocol loads no
table format.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from stream_sink.commit.committer import DEFAULT_MAX_CONTINUOUS_EMPTY_COMMITS, FilesCommitter
from stream_sink.commit.failpoints import FAILPOINTS, failpoint, reset_failpoints
from stream_sink.commit.state_recovery import StateDirectory
from stream_sink.commit.target import MAX_CONTINUOUS_EMPTY_COMMITS, BatchFiles, CommitTarget
from stream_sink.metrics.committer import CommitterMetricsSnapshot

if TYPE_CHECKING:
    from stream_sink.commit.iceberg.staging import (
        StagedManifests,
        deserialize_staged_manifests,
        read_staged_files,
        serialize_staged_manifests,
    )
    from stream_sink.commit.iceberg.target import IcebergTarget
    from stream_sink.commit.iceberg.watermark import (
        JOB_ID,
        MANIFESTS_LOCATION,
        MAX_COMMITTED_CHECKPOINT_ID,
        OPERATOR_ID,
        committed_watermark,
    )

_EXPORTS = {
    "IcebergTarget": "iceberg.target",
    "StagedManifests": "iceberg.staging",
    "deserialize_staged_manifests": "iceberg.staging",
    "read_staged_files": "iceberg.staging",
    "serialize_staged_manifests": "iceberg.staging",
    "JOB_ID": "iceberg.watermark",
    "MANIFESTS_LOCATION": "iceberg.watermark",
    "MAX_COMMITTED_CHECKPOINT_ID": "iceberg.watermark",
    "OPERATOR_ID": "iceberg.watermark",
    "committed_watermark": "iceberg.watermark",
}
"""The Iceberg target's public names: the module under this package each is loaded from."""

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
    "StagedManifests",
    "FilesCommitter",
    "IcebergTarget",
    "StateDirectory",
    "committed_watermark",
    "deserialize_staged_manifests",
    "failpoint",
    "read_staged_files",
    "reset_failpoints",
    "serialize_staged_manifests",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
