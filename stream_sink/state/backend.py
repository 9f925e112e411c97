"""The operator state backend interface and the behaviour every backend shares.

Invariants every backend keeps:
- ``write`` applies all operations of a batch or none, and when it returns they are
  durable (synced WAL or log) for backends with a directory: a crash after the return
  cannot lose them, a crash before it leaves none of them visible.
- ``scan`` yields keys in ascending byte order.
- Stored keys are namespaced (``d`` + user key, ``m`` + metadata name) so user keys
  cannot collide with metadata; every stored value carries the versioned header of
  :mod:`stream_sink.state.encoding`.
- A database is ours only if it carries the format marker; one without it that holds
  anything, or one that belongs to another sink, is refused with CorruptStateError.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Literal

from stream_sink.exceptions import (
    CorruptStateError,
    SinkIOError,
    StreamSinkError,
    ValidationError,
)
from stream_sink.io.errors import describe
from stream_sink.state.batch import OpKind, StateWriteBatch
from stream_sink.state.encoding import STATE_FORMAT_VERSION, decode_supported, encode_value

BackendKind = Literal["rocksdb", "memory"]

DATA_PREFIX = b"d"
META_PREFIX = b"m"
META_FORMAT = "format"
META_SINK_ID = "sink-id"
META_JOB_ID = "job-id"
"""Metadata name under which the committer keeps the job (Spark query) id."""

FORMAT_MARKER = b"stream_sink operator state"

RawOp = tuple[bytes, "bytes | None"]
"""An internal key and its encoded value, or None to delete it."""


class OperatorStateBackend(ABC):
    """Durable key/value operator state of one sink, with a small metadata area."""

    kind: BackendKind

    def __init__(self, location: str) -> None:
        self._location = location
        self._closed = False
        self._was_created = False

    # --- what subclasses provide ------------------------------------------------

    @abstractmethod
    def _raw_get(self, key: bytes) -> bytes | None: ...

    @abstractmethod
    def _raw_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Internal (key, value) pairs starting with ``prefix``, ascending."""

    @abstractmethod
    def _raw_write(self, ops: Sequence[RawOp]) -> None:
        """Apply ``ops`` atomically and durably, in order."""

    @abstractmethod
    def _raw_snapshot(self, directory: str) -> None: ...

    @abstractmethod
    def _raw_close(self) -> None: ...

    # --- opening ------------------------------------------------------------------

    def _initialise(self, sink_id: str | None) -> None:
        """Check the format marker and sink id; stamp a fresh database."""
        marker = self._raw_get(META_PREFIX + META_FORMAT.encode())
        if marker is None:
            if next(iter(self._raw_scan(b"")), None) is not None:
                raise CorruptStateError(
                    f"state directory {self._location} holds a database without the "
                    "stream_sink state marker (a foreign database?)"
                )
            ops: list[RawOp] = [(META_PREFIX + META_FORMAT.encode(), self._enc(FORMAT_MARKER))]
            if sink_id is not None:
                ops.append((META_PREFIX + META_SINK_ID.encode(), self._enc(sink_id.encode())))
            self._raw_write(ops)
            self._was_created = True
            return
        if self._dec(marker, "format marker") != FORMAT_MARKER:
            raise CorruptStateError(f"state directory {self._location}: unknown format marker")
        self._check_sink_id(sink_id)

    def _check_sink_id(self, sink_id: str | None) -> None:
        stored = self._raw_get(META_PREFIX + META_SINK_ID.encode())
        if sink_id is None:
            return
        if stored is None:
            self._raw_write([(META_PREFIX + META_SINK_ID.encode(), self._enc(sink_id.encode()))])
            return
        owner = self._dec(stored, "sink id").decode("utf-8", "replace")
        if owner != sink_id:
            raise CorruptStateError(
                f"state directory {self._location} holds the state of sink {owner!r}, "
                f"not of sink {sink_id!r}"
            )

    # --- public API -----------------------------------------------------------------

    @property
    def location(self) -> str:
        """The state directory (``<memory>`` for a backend without one)."""
        return self._location

    @property
    def was_created(self) -> bool:
        """True when this open created the state (no earlier state existed)."""
        return self._was_created

    @property
    def sink_id(self) -> str | None:
        """The sink this state belongs to, when it was opened with one."""
        self._check_open()
        raw = self._raw_get(META_PREFIX + META_SINK_ID.encode())
        return None if raw is None else self._dec(raw, "sink id").decode("utf-8")

    def is_empty(self) -> bool:
        """True when no user key is stored (metadata does not count)."""
        self._check_open()
        return next(iter(self._raw_scan(DATA_PREFIX)), None) is None

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        raw = self._raw_get(DATA_PREFIX + key)
        return None if raw is None else self._dec(raw, f"key {key!r}")

    def scan(self, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """User ``(key, value)`` pairs whose key starts with ``prefix``, ascending by key.

        The pairs are a consistent view taken when iteration starts: writes made while
        iterating are not seen. Finish or drop the iterator before ``close()``.
        """
        self._check_open()
        cut = len(DATA_PREFIX)
        for raw_key, raw in self._raw_scan(DATA_PREFIX + prefix):
            yield raw_key[cut:], self._dec(raw, f"key {raw_key[cut:]!r}")

    def write(self, batch: StateWriteBatch) -> None:
        """Apply every operation of ``batch`` atomically; durable when this returns."""
        self._check_open()
        ops: list[RawOp] = []
        for op in batch:
            if op.kind is OpKind.DELETE:
                ops.append((DATA_PREFIX + op.key, None))
            else:
                prefix = DATA_PREFIX if op.kind is OpKind.PUT else META_PREFIX
                ops.append((prefix + op.key, self._enc(op.value or b"")))
        if not ops:
            return
        try:
            self._raw_write(ops)
        except StreamSinkError:
            raise
        except Exception as e:  # RocksDB reports a full or read-only disk as a bare Exception
            raise SinkIOError(
                f"writing operator state at {self._location} failed: {describe(e)}"
            ) from e

    def put(self, key: bytes, value: bytes) -> None:
        self.write(StateWriteBatch().put(key, value))

    def delete(self, key: bytes) -> None:
        self.write(StateWriteBatch().delete(key))

    def get_meta(self, name: str) -> bytes | None:
        """A metadata entry (e.g. :data:`META_JOB_ID`), or None when unset."""
        self._check_open()
        if not name:
            raise ValidationError("state metadata name must be non-empty")
        raw = self._raw_get(META_PREFIX + name.encode("utf-8"))
        return None if raw is None else self._dec(raw, f"metadata {name!r}")

    def put_meta(self, name: str, value: bytes) -> None:
        self.write(StateWriteBatch().put_meta(name, value))

    def snapshot_to(self, directory: str) -> None:
        """Write a consistent copy of all state (data and metadata) to ``directory``.

        ``directory`` must not exist; it becomes a state directory of the same kind
        that :func:`stream_sink.state.restore_from_snapshot` can install.
        """
        self._check_open()
        self._raw_snapshot(directory)

    def close(self) -> None:
        """Release the directory (and its lock); idempotent."""
        if not self._closed:
            self._closed = True
            self._raw_close()

    def __enter__(self) -> OperatorStateBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- helpers --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StreamSinkError(f"state backend at {self._location} is closed")

    @staticmethod
    def _enc(payload: bytes) -> bytes:
        return encode_value(STATE_FORMAT_VERSION, payload)

    def _dec(self, raw: bytes, what: str) -> bytes:
        return decode_supported(raw, where=f"state directory {self._location}, {what}")
