"""Operator state in RocksDB (through rocksdict), the production backend.

Writes go through one ``WriteBatch`` with ``WriteOptions.sync`` set, so a write is in
the fsync'd WAL before ``write`` returns. Snapshots are RocksDB Checkpoints (hard
links of immutable SST files plus a copy of the live WAL and manifest), consistent
as of one point in time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import rocksdict

from stream_sink.exceptions import (
    CorruptStateError,
    InvalidOptionError,
    StateLockedError,
)
from stream_sink.io.private import make_private_tree, private_dirs
from stream_sink.state.backend import BackendKind, OperatorStateBackend, RawOp
from stream_sink.state.layout import fsync_dir, inspect_state_dir

Compression = Literal["none", "snappy", "lz4", "zstd"]

log = logging.getLogger(__name__)

_COMPRESSION = {
    "none": rocksdict.DBCompressionType.none,
    "snappy": rocksdict.DBCompressionType.snappy,
    "lz4": rocksdict.DBCompressionType.lz4,
    "zstd": rocksdict.DBCompressionType.zstd,
}


@dataclass(frozen=True)
class RocksDBOptions:
    """How a RocksDB state database is opened.

    ``sync_writes=False`` trades durability for speed (a crash may lose acknowledged
    writes): only for tests and benchmarks, never for a sink that promises
    exactly-once. ``use_fsync`` makes RocksDB call fsync instead of fdatasync.

    What a long-running sink leaves in the folder stays bounded: RocksDB's info log
    (``LOG``, a few lines per flush and checkpoint; no periodic statistics dumps) rolls
    at ``max_log_file_size`` keeping ``keep_log_file_num`` old ones, its MANIFEST rolls at
    ``max_manifest_file_size``, and a small write buffer keeps the write-ahead log short
    (the committer's state is a few kilobytes per checkpoint, written and deleted). The
    MANIFEST gains about 200 bytes per checkpoint and every checkpoint copies it whole,
    so its bound is also the bound of a checkpoint's copy: at 64 KiB it rolls every few
    hundred checkpoints and the folder reaches its steady size within minutes.
    """

    path: str
    sync_writes: bool = True
    use_fsync: bool = False
    write_buffer_size: int = 2 * 1024 * 1024
    max_write_buffer_number: int = 2
    compression: Compression = "lz4"
    keep_log_file_num: int = 1
    max_log_file_size: int = 64 * 1024
    max_manifest_file_size: int = 64 * 1024

    def __post_init__(self) -> None:
        if not self.path:
            raise InvalidOptionError("RocksDB state path must be non-empty")
        if self.compression not in _COMPRESSION:
            raise InvalidOptionError(
                f"RocksDB compression {self.compression!r} is not one of {sorted(_COMPRESSION)}"
            )
        if self.write_buffer_size <= 0 or self.max_write_buffer_number <= 0:
            raise InvalidOptionError("RocksDB write buffer size and number must be positive")
        for name in ("keep_log_file_num", "max_log_file_size", "max_manifest_file_size"):
            if getattr(self, name) <= 0:
                raise InvalidOptionError(
                    f"RocksDB {name} must be positive, got {getattr(self, name)}"
                )

    def to_rocksdict(self) -> rocksdict.Options:
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_paranoid_checks(True)
        opts.set_use_fsync(self.use_fsync)
        opts.set_write_buffer_size(self.write_buffer_size)
        opts.set_max_write_buffer_number(self.max_write_buffer_number)
        opts.set_compression_type(_COMPRESSION[self.compression]())
        opts.set_keep_log_file_num(self.keep_log_file_num)
        opts.set_max_log_file_size(self.max_log_file_size)
        opts.set_max_manifest_file_size(self.max_manifest_file_size)
        opts.set_stats_dump_period_sec(0)  # no statistics dumps into the info log
        return opts

    def write_options(self) -> rocksdict.WriteOptions:
        wo = rocksdict.WriteOptions()
        wo.sync = self.sync_writes
        return wo


class RocksDBStateBackend(OperatorStateBackend):
    """Operator state in a RocksDB database at ``options.path`` (created when absent).

    Only one handle may have a directory open at a time (RocksDB's LOCK file); a second
    open raises StateLockedError.
    """

    kind: BackendKind = "rocksdb"

    def __init__(self, options: RocksDBOptions, *, sink_id: str | None = None) -> None:
        super().__init__(options.path)
        self.options = options
        kind = inspect_state_dir(options.path)
        if kind == "memory":
            raise CorruptStateError(
                f"state directory {options.path} holds an in-memory backend's log, "
                "not a RocksDB database"
            )
        private_dirs(options.path)
        self._db = _open(options)
        make_private_tree(options.path)
        try:
            self._db.set_write_options(options.write_options())
            self._initialise(sink_id)
        except BaseException:
            self._db.close()
            raise

    def _raw_get(self, key: bytes) -> bytes | None:
        value = self._db.get(key)
        return None if value is None else bytes(value)

    def _raw_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        it = self._db.iter()
        try:
            it.seek(prefix)
            while it.valid():
                key = bytes(it.key())
                if not key.startswith(prefix):
                    return
                yield key, bytes(it.value())
                it.next()
        finally:
            del it

    def _raw_write(self, ops: Sequence[RawOp]) -> None:
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in ops:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        self._db.write(batch)

    def _raw_snapshot(self, directory: str) -> None:
        parent = os.path.dirname(os.path.abspath(directory))
        private_dirs(parent)
        rocksdict.Checkpoint(self._db).create_checkpoint(directory)
        fsync_dir(parent)

    def _raw_close(self) -> None:
        try:
            self._db.close()
        except Exception as e:  # after a failed write (disk full) RocksDB refuses to flush
            log.warning(
                "closing operator state at %s: %s (what was written is durable)", self._location, e
            )
        del self._db  # drops the handle, and with it the directory's lock


def _open(options: RocksDBOptions) -> rocksdict.Rdict:
    try:
        return rocksdict.Rdict(options.path, options.to_rocksdict())
    except Exception as e:  # rocksdict raises plain Exception for every RocksDB status
        text = str(e)
        if "lock" in text.lower():
            raise StateLockedError(
                f"state directory {options.path} is already open elsewhere: {text}"
            ) from e
        raise CorruptStateError(
            f"state directory {options.path} cannot be opened as RocksDB: {text}"
        ) from e
