"""Operator state held in a dict, optionally made durable by an append-only log.

Without a path the state lives only as long as the object (tests of pure logic).
With a path, every write appends one checksummed record to ``<path>/state.log`` and
fsyncs it (unless ``sync=False``) before returning, so close/reopen and a crash
followed by a reopen behave as they do with RocksDB: a record is the unit of
atomicity, and a torn record at the end of the log (a crash mid-append) was never
acknowledged and is dropped. A snapshot is a directory holding a compacted log.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence

from stream_sink.exceptions import CorruptStateError, StateLockedError
from stream_sink.io.private import PRIVATE_DIR, PRIVATE_FILE, private_dirs
from stream_sink.state.backend import BackendKind, OperatorStateBackend, RawOp
from stream_sink.state.layout import MEMORY_LOG_FILE, fsync_dir, inspect_state_dir
from stream_sink.state.statelog import LOG_HEADER, encode_record, read_log

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]


class InMemoryStateBackend(OperatorStateBackend):
    """Dict-backed state with the same read, write and snapshot semantics as RocksDB."""

    kind: BackendKind = "memory"

    def __init__(
        self, path: str | None = None, *, sink_id: str | None = None, sync: bool = True
    ) -> None:
        super().__init__(path if path is not None else "<memory>")
        self._path = path
        self._sync = sync
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []  # sorted view of _data's keys
        self._log: int | None = None
        if path is not None:
            self._open_log(path)
        try:
            self._initialise(sink_id)
        except BaseException:
            self._raw_close()
            raise

    # --- the log ------------------------------------------------------------------

    def _open_log(self, path: str) -> None:
        kind = inspect_state_dir(path)
        if kind == "rocksdb":
            raise CorruptStateError(
                f"state directory {path} holds a RocksDB database, not an in-memory backend's log"
            )
        log_path = os.path.join(path, MEMORY_LOG_FILE)
        private_dirs(path)
        fd = os.open(log_path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            _lock(fd, path)
            good_end = self._replay(fd, log_path)
            os.ftruncate(fd, good_end)  # drop a torn, unacknowledged tail
            os.lseek(fd, good_end, os.SEEK_SET)
            if good_end == 0:
                os.write(fd, LOG_HEADER)
                os.fsync(fd)
                fsync_dir(path)
        except BaseException:
            os.close(fd)
            raise
        self._log = fd

    def _replay(self, fd: int, log_path: str) -> int:
        size = os.fstat(fd).st_size
        os.lseek(fd, 0, os.SEEK_SET)
        data = b""
        while len(data) < size:
            chunk = os.read(fd, size - len(data))
            if not chunk:
                break
            data += chunk
        if not data:
            return 0
        records, good_end = read_log(data, where=log_path)
        for ops in records:
            self._apply(ops)
        return good_end

    # --- primitives -------------------------------------------------------------------

    def _raw_get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def _raw_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        keys = self._keys
        start = bisect.bisect_left(keys, prefix)
        end = start
        while end < len(keys) and keys[end].startswith(prefix):
            end += 1
        # a copy, as a RocksDB iterator's implicit snapshot: later writes are not seen
        yield from [(key, self._data[key]) for key in keys[start:end]]

    def _raw_write(self, ops: Sequence[RawOp]) -> None:
        if self._log is not None:
            self._append(self._log, encode_record(ops))
        self._apply(ops)

    def _append(self, fd: int, record: bytes) -> None:
        """Append and sync one record; on failure cut the log back so no torn record
        is left in front of later ones."""
        start = os.lseek(fd, 0, os.SEEK_CUR)
        try:
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view) :]
            if self._sync:
                os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
            raise

    def _apply(self, ops: Sequence[RawOp]) -> None:
        for key, value in ops:
            if value is None:
                if self._data.pop(key, None) is not None:
                    del self._keys[bisect.bisect_left(self._keys, key)]
            else:
                if key not in self._data:
                    bisect.insort(self._keys, key)
                self._data[key] = value

    def _raw_snapshot(self, directory: str) -> None:
        private_dirs(os.path.dirname(os.path.abspath(directory)))
        os.mkdir(directory, PRIVATE_DIR)  # must not exist, as for a RocksDB checkpoint
        items = [(key, self._data[key]) for key in self._keys]
        log_path = os.path.join(directory, MEMORY_LOG_FILE)
        with open(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE), "wb") as f:
            f.write(LOG_HEADER)
            f.write(encode_record(items))
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(directory)
        fsync_dir(os.path.dirname(os.path.abspath(directory)))

    def _raw_close(self) -> None:
        if self._log is not None:
            os.close(self._log)  # closing the descriptor releases the flock
            self._log = None


def _lock(fd: int, path: str) -> None:
    if fcntl is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as e:
        raise StateLockedError(f"state directory {path} is already open elsewhere") from e
