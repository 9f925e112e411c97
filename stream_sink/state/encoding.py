"""Versioned byte encoding for everything stored in operator state.

Every stored value is ``b"SSK" | version (uint16, big endian) | payload``: the
envelope of :mod:`stream_sink.envelope`, whose policy applies (foreign bytes are
:class:`CorruptStateError`; a newer version is :class:`UnsupportedError`, so such
state is refused instead of misread, and never replaced by an older copy).
"""

from __future__ import annotations

from stream_sink.envelope import Envelope
from stream_sink.exceptions import CorruptStateError

MAGIC = b"SSK"
STATE_FORMAT_VERSION = 1
"""The layout version this code writes and the newest it reads."""

STATE_VALUE = Envelope(MAGIC, STATE_FORMAT_VERSION, "stream_sink state value", CorruptStateError)
_ANY_VERSION = Envelope(MAGIC, 0xFFFF, "stream_sink state value", CorruptStateError)
HEADER_SIZE = STATE_VALUE.header_size


def encode_value(version: int, payload: bytes) -> bytes:
    """``payload`` prefixed with the magic and ``version`` (1..65535)."""
    return STATE_VALUE.wrap(payload, version)


def decode_value(data: bytes, *, where: str) -> tuple[int, bytes]:
    """``(version, payload)`` of bytes made by :func:`encode_value`, whatever the version.

    ``where`` names the directory, file or key in the error raised for bytes that do
    not carry the header (:class:`CorruptStateError`).
    """
    return _ANY_VERSION.unwrap(data, where=where)


def decode_supported(data: bytes, *, where: str) -> bytes:
    """The payload of ``data``, refusing versions newer than :data:`STATE_FORMAT_VERSION`
    (:class:`UnsupportedError`, the envelope's policy)."""
    return STATE_VALUE.payload(data, where=where)
