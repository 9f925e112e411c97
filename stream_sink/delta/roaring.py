"""Delta's ``RoaringBitmapArray`` (PROTOCOL.md "Deletion Vector Format"): a magic number,
then a 64-bit Roaring bitmap in the portable format of the RoaringFormatSpec, i.e. a
count of 32-bit buckets, each a high key and a 32-bit portable Roaring bitmap.

Decoding accepts every container kind (array, bitmap, run) and both cookies; encoding
writes array and bitmap containers only (no runs), which every reader accepts.
Invariant: ``decode(encode(rows))`` is ``rows`` sorted and without duplicates. All
numbers are little endian, as the format defines.
"""

from __future__ import annotations

import struct

import numpy as np

from stream_sink.exceptions import CorruptionError

MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
"""The older "native" layout (as in the protocol's inline example): the magic, a count of
32-bit bitmaps and each one's size, big endian, the bitmap's index being its high key."""
_NO_RUNS = 12346
_WITH_RUNS = 12347
_ARRAY_MAX = 4096
_NO_OFFSET_THRESHOLD = 4


class _Reader:
    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.pos, self.where = data, 0, where

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise CorruptionError(f"{self.where}: the deletion vector ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u16s(self, n: int) -> np.ndarray:
        return np.frombuffer(self.take(2 * n), "<u2").astype(np.uint32)

    def unpack(self, fmt: str) -> int:
        return int(struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0])


def decode(data: bytes, where: str = "deletion vector") -> np.ndarray:
    """The row positions (sorted uint64) of a serialized ``RoaringBitmapArray``."""
    r = _Reader(data, where)
    if data[:4] == struct.pack(">i", NATIVE_MAGIC):
        return _decode_native(r)
    magic = r.unpack("<i")
    if magic != MAGIC:
        raise CorruptionError(f"{where}: magic number {magic} is not {MAGIC}")
    parts = []
    for _ in range(r.unpack("<q")):
        high = r.unpack("<I")
        if high & 0x80000000:
            raise CorruptionError(f"{where}: bucket key {high} has its top bit set")
        low = _decode32(r)
        parts.append((np.uint64(high) << np.uint64(32)) | low.astype(np.uint64))
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def _decode_native(r: _Reader) -> np.ndarray:
    r.take(4)
    parts = []
    for high in range(r.unpack(">i")):
        size = r.unpack(">i")
        low = _decode32(_Reader(r.take(size), r.where))
        parts.append((np.uint64(high) << np.uint64(32)) | low.astype(np.uint64))
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def _decode32(r: _Reader) -> np.ndarray:
    cookie = r.unpack("<I")
    if cookie & 0xFFFF == _WITH_RUNS:
        size = (cookie >> 16) + 1
        run_flags = np.unpackbits(
            np.frombuffer(r.take((size + 7) // 8), np.uint8), bitorder="little"
        )
    elif cookie == _NO_RUNS:
        size = r.unpack("<I")
        run_flags = np.zeros(size, np.uint8)
    else:
        raise CorruptionError(f"{r.where}: unknown Roaring cookie {cookie}")
    header = r.u16s(2 * size).reshape(size, 2) if size else np.empty((0, 2), np.uint32)
    if cookie == _NO_RUNS or size >= _NO_OFFSET_THRESHOLD:
        r.take(4 * size)  # offsets: the containers follow in order anyway
    out = []
    for i in range(size):
        key, card = int(header[i, 0]), int(header[i, 1]) + 1
        if run_flags[i]:
            runs = r.u16s(2 * r.unpack("<H")).reshape(-1, 2)
            low = np.concatenate(
                [np.arange(s, s + n + 1, dtype=np.uint32) for s, n in runs]
                or [np.empty(0, np.uint32)]
            )
        elif card <= _ARRAY_MAX:
            low = r.u16s(card)
        else:
            bits = np.unpackbits(np.frombuffer(r.take(8192), np.uint8), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
        out.append((np.uint32(key) << np.uint32(16)) | low)
    return np.concatenate(out) if out else np.empty(0, np.uint32)


def encode(rows: np.ndarray) -> bytes:
    """The ``RoaringBitmapArray`` of row positions ``rows`` (any order, any duplicates)."""
    rows = np.unique(np.asarray(rows, dtype=np.uint64))
    highs = (rows >> np.uint64(32)).astype(np.uint32)
    out = [struct.pack("<i", MAGIC)]
    keys, starts = np.unique(highs, return_index=True)
    bounds = [*starts.tolist(), len(rows)]
    out.append(struct.pack("<q", len(keys)))
    for i, key in enumerate(keys.tolist()):
        if key & 0x80000000:
            raise ValueError(f"row position {int(rows[bounds[i]])} is out of range")
        low = (rows[bounds[i] : bounds[i + 1]] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        out.append(struct.pack("<I", key))
        out.append(_encode32(low))
    return b"".join(out)


def _encode32(values: np.ndarray) -> bytes:
    keys16 = (values >> np.uint32(16)).astype(np.uint16)
    ckeys, starts = np.unique(keys16, return_index=True)
    bounds = [*starts.tolist(), len(values)]
    bodies = []
    header = []
    for i, key in enumerate(ckeys.tolist()):
        low = (values[bounds[i] : bounds[i + 1]] & np.uint32(0xFFFF)).astype("<u2")
        header.append(struct.pack("<HH", key, len(low) - 1))
        if len(low) <= _ARRAY_MAX:
            bodies.append(low.tobytes())
        else:
            bits = np.zeros(65536, np.uint8)
            bits[low.astype(np.int64)] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
    size = len(bodies)
    offset = 8 + 4 * size + 4 * size
    offsets = []
    for body in bodies:
        offsets.append(struct.pack("<I", offset))
        offset += len(body)
    return b"".join([struct.pack("<II", _NO_RUNS, size), *header, *offsets, *bodies])
