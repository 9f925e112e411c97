"""Delta's ``RoaringBitmapArray`` (PROTOCOL.md "Deletion Vector Format"): a magic number,
then a 64-bit Roaring bitmap in the portable format of the RoaringFormatSpec (see
:mod:`stream_sink.bitmaps.roaring`), or the older "native" layout.

Invariant: ``decode(encode(rows))`` is ``rows`` sorted and without duplicates. All
numbers are little endian, as the format defines (the native layout: big endian).
"""

from __future__ import annotations

import struct

import numpy as np

from stream_sink.bitmaps.roaring import Reader, decode32, decode64, encode64
from stream_sink.exceptions import CorruptionError

MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
"""The older "native" layout (as in the protocol's inline example): the magic, a count of
32-bit bitmaps and each one's size, big endian, the bitmap's index being its high key."""


def decode(data: bytes, where: str = "deletion vector", limit: int | None = None) -> np.ndarray:
    """The row positions (sorted uint64) of a serialized ``RoaringBitmapArray``; more
    than ``limit`` (the descriptor's cardinality, when given) raise CorruptionError
    before they are expanded."""
    r = Reader(data, where)
    if data[:4] == struct.pack(">i", NATIVE_MAGIC):
        return _decode_native(r, limit)
    magic = r.unpack("<i")
    if magic != MAGIC:
        raise CorruptionError(f"{where}: magic number {magic} is not {MAGIC}")
    return decode64(r, limit)


def _decode_native(r: Reader, limit: int | None) -> np.ndarray:
    r.take(4)
    parts = []
    for high in range(r.count(r.unpack(">i"), 4, "32-bit bitmaps")):
        size = r.unpack(">i")
        low = decode32(Reader(r.take(size), r.where), limit)
        if limit is not None:
            limit -= len(low)
        parts.append((np.uint64(high) << np.uint64(32)) | low.astype(np.uint64))
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def encode(rows: np.ndarray) -> bytes:
    """The ``RoaringBitmapArray`` of row positions ``rows`` (any order, any duplicates)."""
    return struct.pack("<i", MAGIC) + encode64(rows)
