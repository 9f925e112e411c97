"""The one versioned envelope for bytes stream_sink stores or ships between processes.

Layout: ``magic | version (uint16, big endian) | payload``. The magic names what the
bytes are (foreign or damaged bytes are detected, not misread); the version names the
layout of the payload.

Policy, the same for every user (operator state values, staged checkpoints, staging
manifests lists, write results, Delta batches):

- Bytes without the magic, or too short for a header: :class:`CorruptionError` (the
  caller's subclass, e.g. ``CorruptStateError``), naming ``where``.
- A version NEWER than the newest this code reads: :class:`UnsupportedError`, never
  corruption. The bytes are fine and this code is old: a reader must not treat them as
  damaged (recovery would otherwise fall back to an older copy or drop them).
- Version 0 is never written and reads as corruption.
- Every older version (1..newest) is read; a format that changes bumps its version and
  keeps reading the previous ones.

Envelopes nest (a state value holds a staged checkpoint, which lists staging manifests):
each layer versions only its own payload.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from stream_sink.exceptions import CorruptionError, UnsupportedError

_VERSION = struct.Struct(">H")


@dataclass(frozen=True)
class Envelope:
    """The envelope of one kind of bytes: its ``magic`` and the newest ``version`` this
    code writes and reads. ``what`` names the kind in errors."""

    magic: bytes
    version: int
    what: str
    corruption: type[CorruptionError] = CorruptionError

    def __post_init__(self) -> None:
        if not self.magic or not 1 <= self.version <= 0xFFFF:
            raise ValueError(f"bad envelope for {self.what}: {self.magic!r} v{self.version}")

    @property
    def header_size(self) -> int:
        return len(self.magic) + _VERSION.size

    def wrap(self, payload: bytes, version: int | None = None) -> bytes:
        """``payload`` behind the header (``version`` defaults to the newest)."""
        v = self.version if version is None else version
        if not 1 <= v <= 0xFFFF:
            raise ValueError(f"{self.what}: format version {v} is outside 1..65535")
        return self.magic + _VERSION.pack(v) + bytes(payload)

    def unwrap(self, data: bytes, *, where: str) -> tuple[int, bytes]:
        """``(version, payload)`` of bytes made by :meth:`wrap`, by the policy above."""
        if len(data) < self.header_size or bytes(data[: len(self.magic)]) != self.magic:
            shown = bytes(data[: self.header_size]).hex() or "empty"
            raise self.corruption(f"{where}: not a {self.what} (starts with {shown})")
        (version,) = _VERSION.unpack_from(data, len(self.magic))
        if version > self.version:
            raise UnsupportedError(
                f"{where}: {self.what} in format version {version}, newer than this "
                f"stream_sink reads (up to {self.version}); upgrade stream_sink to read it"
            )
        if version == 0:
            raise self.corruption(f"{where}: {self.what} carries format version 0")
        return version, bytes(data[self.header_size :])

    def payload(self, data: bytes, *, where: str) -> bytes:
        """The payload of :meth:`unwrap`, for kinds that have only ever had one version."""
        return self.unwrap(data, where=where)[1]
