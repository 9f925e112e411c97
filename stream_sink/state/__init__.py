"""Operator state: durable key/value state of a sink, on the driver.

The committer keeps ``pending/<batch>`` and ``staged/<checkpoint>`` entries here and the
job id in the metadata area; see ``OperatorStateBackend`` for the guarantees.
"""

from __future__ import annotations

from stream_sink.state.backend import (
    META_JOB_ID,
    BackendKind,
    OperatorStateBackend,
)
from stream_sink.state.batch import OpKind, StateOp, StateWriteBatch
from stream_sink.state.encoding import STATE_FORMAT_VERSION, decode_value, encode_value
from stream_sink.state.factory import open_state_backend, restore_from_snapshot
from stream_sink.state.layout import inspect_state_dir, state_dir_for, validate_sink_id
from stream_sink.state.memory_backend import InMemoryStateBackend
from stream_sink.state.rocksdb_backend import RocksDBOptions, RocksDBStateBackend

__all__ = [
    "META_JOB_ID",
    "STATE_FORMAT_VERSION",
    "BackendKind",
    "InMemoryStateBackend",
    "OpKind",
    "OperatorStateBackend",
    "RocksDBOptions",
    "RocksDBStateBackend",
    "StateOp",
    "StateWriteBatch",
    "decode_value",
    "encode_value",
    "inspect_state_dir",
    "open_state_backend",
    "restore_from_snapshot",
    "state_dir_for",
    "validate_sink_id",
]
