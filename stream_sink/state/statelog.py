"""The append-only log format of the in-memory backend's directory.

``header | record*``; header = versioned ``LOG`` tag; record =
``length (uint32) | crc32(body) (uint32) | body``; body = ``count (uint32)`` then per
operation ``flag (0 put, 1 delete) | key length | key | [value length | value]``.
A record that runs past the end of the file, or whose checksum fails while being the
last one, is a torn append and ends the log; a bad record followed by more data is
corruption.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from stream_sink.exceptions import CorruptStateError
from stream_sink.state.backend import RawOp
from stream_sink.state.encoding import (
    HEADER_SIZE,
    STATE_FORMAT_VERSION,
    decode_supported,
    encode_value,
)

_TAG = b"LOG"
LOG_HEADER = encode_value(STATE_FORMAT_VERSION, _TAG)
_U32 = struct.Struct(">I")
_REC = struct.Struct(">II")


def encode_record(ops: Sequence[RawOp]) -> bytes:
    parts = [_U32.pack(len(ops))]
    for key, value in ops:
        parts.append(b"\x01" if value is None else b"\x00")
        parts.append(_U32.pack(len(key)) + key)
        if value is not None:
            parts.append(_U32.pack(len(value)) + value)
    body = b"".join(parts)
    return _REC.pack(len(body), zlib.crc32(body)) + body


def read_log(data: bytes, *, where: str) -> tuple[list[list[RawOp]], int]:
    """The records of a whole log file and the offset where its intact part ends."""
    if len(data) < len(LOG_HEADER):
        if LOG_HEADER.startswith(data):
            return [], 0  # torn while being created: nothing was acknowledged
        raise CorruptStateError(f"{where}: not a stream_sink state log")
    if decode_supported(data[: len(LOG_HEADER)], where=where) != _TAG:
        raise CorruptStateError(f"{where}: not a stream_sink state log")
    records: list[list[RawOp]] = []
    pos = HEADER_SIZE + len(_TAG)
    while pos + _REC.size <= len(data):
        length, crc = _REC.unpack_from(data, pos)
        end = pos + _REC.size + length
        if end > len(data):
            break
        body = data[pos + _REC.size : end]
        if zlib.crc32(body) != crc:
            if end == len(data):
                break
            raise CorruptStateError(f"{where}: checksum mismatch in the record at byte {pos}")
        records.append(_decode_body(body, where=f"{where}, record at byte {pos}"))
        pos = end
    return records, pos


def _decode_body(body: bytes, *, where: str) -> list[RawOp]:
    try:
        (count,) = _U32.unpack_from(body, 0)
        pos = _U32.size
        ops: list[RawOp] = []
        for _ in range(count):
            flag = body[pos]
            key, pos = _take(body, pos + 1)
            value: bytes | None = None
            if flag == 0:
                value, pos = _take(body, pos)
            elif flag != 1:
                raise ValueError(f"unknown operation flag {flag}")
            ops.append((key, value))
    except (struct.error, IndexError, ValueError) as e:
        raise CorruptStateError(f"{where}: undecodable record ({e})") from e
    if pos != len(body):
        raise CorruptStateError(f"{where}: {len(body) - pos} trailing bytes in record")
    return ops


def _take(body: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = _U32.unpack_from(body, pos)
    start = pos + _U32.size
    if start + n > len(body):
        raise ValueError("length runs past the record")
    return bytes(body[start : start + n]), start + n
