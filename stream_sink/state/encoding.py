"""Versioned byte encoding for everything stored in operator state.

Every stored value is ``MAGIC | version (uint16, big endian) | payload``. The magic
makes foreign or corrupt bytes detectable; the version makes a value written by a
newer format detectable, so it is refused instead of misread.
"""

from __future__ import annotations

import struct

from stream_sink.exceptions import CorruptStateError, UnsupportedError

MAGIC = b"SSK"
STATE_FORMAT_VERSION = 1
"""The layout version this code writes and the newest it reads."""

_VERSION = struct.Struct(">H")
HEADER_SIZE = len(MAGIC) + _VERSION.size


def encode_value(version: int, payload: bytes) -> bytes:
    """``payload`` prefixed with the magic and ``version`` (0..65535)."""
    if not 0 <= version <= 0xFFFF:
        raise ValueError(f"format version {version} is outside 0..65535")
    return MAGIC + _VERSION.pack(version) + bytes(payload)


def decode_value(data: bytes, *, where: str) -> tuple[int, bytes]:
    """``(version, payload)`` of bytes made by :func:`encode_value`.

    ``where`` names the directory, file or key in the error raised for bytes that do
    not carry the header (:class:`CorruptStateError`).
    """
    if len(data) < HEADER_SIZE or not data.startswith(MAGIC):
        shown = bytes(data[:HEADER_SIZE]).hex() or "empty"
        raise CorruptStateError(
            f"{where}: value is not in stream_sink state encoding (starts with {shown})"
        )
    (version,) = _VERSION.unpack_from(data, len(MAGIC))
    return version, bytes(data[HEADER_SIZE:])


def decode_supported(data: bytes, *, where: str, newest: int = STATE_FORMAT_VERSION) -> bytes:
    """The payload of ``data``, refusing versions newer than ``newest``.

    A newer version is :class:`UnsupportedError` (the bytes are fine, this code is old),
    not corruption: a caller must not replace such state with an older copy.
    """
    version, payload = decode_value(data, where=where)
    if version > newest:
        raise UnsupportedError(
            f"{where}: written in state format {version}, this stream_sink reads up to {newest}"
        )
    return payload
