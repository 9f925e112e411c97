"""Delta Lake: the transaction log, actions, conflict checks, checkpoints and data files.

Knows nothing of Iceberg (``table/``), the writers, the committer or Spark; the commit
protocol reaches it through ``stream_sink.commit``'s target interface.
"""

from .actions import (
    AddCDCFile,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
)
from .conflicts import ISOLATION_LEVELS, IsolationLevel
from .maintenance import DeltaMaintenanceOptions
from .snapshot import DeltaSnapshot
from .table import DeltaTable
from .transaction import DeltaTransaction

__all__ = [
    "ISOLATION_LEVELS",
    "AddCDCFile",
    "AddFile",
    "CommitInfo",
    "DeltaMaintenanceOptions",
    "DeltaSnapshot",
    "DeltaTable",
    "DeltaTransaction",
    "DomainMetadata",
    "IsolationLevel",
    "Metadata",
    "Protocol",
    "RemoveFile",
    "Txn",
]
