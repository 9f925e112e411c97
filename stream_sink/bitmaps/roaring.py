"""Roaring bitmaps in the portable format of the RoaringFormatSpec: 32-bit bitmaps
(array, bitmap and run containers) and its 64-bit extension (a little-endian count of
32-bit buckets, each a little-endian high key and a 32-bit bitmap), as Iceberg's
``deletion-vector-v1`` blob and Delta's ``RoaringBitmapArray`` both embed them.

Decoding accepts every container kind (array, bitmap, run) and both cookies; encoding
writes array and bitmap containers only (no runs), which every reader accepts.
Invariant: ``decode64(encode64(rows))`` is ``rows`` sorted and without duplicates;
buckets are written in ascending key order. Damage raises CorruptionError naming
``where``.

Decoding trusts no count: a count of buckets or containers is bounded by the bytes
left to hold them, keys must ascend, a run stays inside its container's 65,536 slots
and runs do not overlap, and each container's cardinality (from its header, before
anything is expanded) must match what it holds. With ``limit`` (the cardinality the
caller expects) a bitmap whose headers add up to more positions stops before any of
them is expanded, so a few hundred crafted bytes cannot become millions of positions.
"""

from __future__ import annotations

import struct

import numpy as np

from stream_sink.exceptions import CorruptionError

_NO_RUNS = 12346
_WITH_RUNS = 12347
_ARRAY_MAX = 4096
_NO_OFFSET_THRESHOLD = 4
_SLOTS = 1 << 16
"""Containers in a 32-bit bitmap (one per 16-bit key), and values in one container."""
_MIN_BUCKET = 4 + 8
"""The smallest bucket of a 64-bit bitmap: its key and an empty 32-bit bitmap."""


class Reader:
    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.pos, self.where = data, 0, where

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.remaining:
            raise CorruptionError(f"{self.where}: the deletion vector ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u16s(self, n: int) -> np.ndarray:
        return np.frombuffer(self.take(2 * n), "<u2").astype(np.uint32)

    def unpack(self, fmt: str) -> int:
        return int(struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0])

    def count(self, n: int, item_bytes: int, what: str) -> int:
        """``n`` (a count read from the bitmap) when the bytes left can hold that many
        items of at least ``item_bytes`` each."""
        if n < 0 or n * item_bytes > self.remaining:
            raise CorruptionError(
                f"{self.where}: the bitmap claims {n} {what}, its remaining "
                f"{self.remaining} bytes hold at most {self.remaining // item_bytes}"
            )
        return n


def decode64(r: Reader, limit: int | None = None) -> np.ndarray:
    """The positions (sorted uint64) of the portable 64-bit bitmap at ``r``'s position;
    more than ``limit`` positions (when given) raise CorruptionError before expanding."""
    parts = []
    previous = -1
    for _ in range(r.count(r.unpack("<q"), _MIN_BUCKET, "buckets")):
        high = r.unpack("<I")
        if high & 0x80000000:
            raise CorruptionError(f"{r.where}: bucket key {high} has its top bit set")
        if high <= previous:
            raise CorruptionError(f"{r.where}: bucket keys are not ascending at {high}")
        previous = high
        low = decode32(r, limit)
        if limit is not None:
            limit -= len(low)
        parts.append((np.uint64(high) << np.uint64(32)) | low.astype(np.uint64))
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def decode32(r: Reader, limit: int | None = None) -> np.ndarray:
    """The values (sorted uint32) of the portable 32-bit bitmap at ``r``'s position."""
    cookie = r.unpack("<I")
    if cookie & 0xFFFF == _WITH_RUNS:
        size = (cookie >> 16) + 1
        run_flags = np.unpackbits(
            np.frombuffer(r.take((size + 7) // 8), np.uint8), bitorder="little"
        )
    elif cookie == _NO_RUNS:
        size = r.unpack("<I")
        if size > _SLOTS:
            raise CorruptionError(f"{r.where}: {size} containers, a 32-bit bitmap has {_SLOTS}")
        run_flags = np.zeros(size, np.uint8)
    else:
        raise CorruptionError(f"{r.where}: unknown Roaring cookie {cookie}")
    header = r.u16s(2 * size).reshape(size, 2) if size else np.empty((0, 2), np.uint32)
    _check_header(r, header, limit)
    if cookie == _NO_RUNS or size >= _NO_OFFSET_THRESHOLD:
        r.take(4 * size)  # offsets: the containers follow in order anyway
    out = []
    for i in range(size):
        key, card = int(header[i, 0]), int(header[i, 1]) + 1
        if run_flags[i]:
            low = _runs(r, key, card)
        elif card <= _ARRAY_MAX:
            low = r.u16s(card)
            if np.any(np.diff(low) <= 0):
                raise CorruptionError(f"{r.where}: array container {key} is not ascending")
        else:
            bits = np.unpackbits(np.frombuffer(r.take(8192), np.uint8), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
            _check_cardinality(r, key, card, len(low))
        out.append((np.uint32(key) << np.uint32(16)) | low)
    return np.concatenate(out) if out else np.empty(0, np.uint32)


def _check_header(r: Reader, header: np.ndarray, limit: int | None) -> None:
    """Keys ascend; the cardinalities the header declares stay within ``limit``."""
    if np.any(np.diff(header[:, 0].astype(np.int64)) <= 0):
        raise CorruptionError(f"{r.where}: container keys are not ascending")
    declared = int(header[:, 1].astype(np.int64).sum()) + len(header)
    if limit is not None and declared > limit:
        raise CorruptionError(
            f"{r.where}: its containers declare {declared} positions where at most {limit} "
            "remain of the cardinality its entry declares"
        )


def _runs(r: Reader, key: int, card: int) -> np.ndarray:
    """Run container ``key``'s values: its runs (start, length - 1) ascend, do not
    overlap, stay inside the container's slots and add up to the header's ``card``."""
    runs = r.u16s(2 * r.unpack("<H")).reshape(-1, 2)
    starts, ends = runs[:, 0], runs[:, 0] + runs[:, 1]
    if np.any(ends >= _SLOTS) or np.any(starts[1:] <= ends[:-1]):
        raise CorruptionError(
            f"{r.where}: the runs of container {key} overlap, are out of order or pass "
            f"its {_SLOTS} slots"
        )
    _check_cardinality(r, key, card, int((runs[:, 1] + 1).sum()))
    if not len(runs):
        return np.empty(0, np.uint32)
    return np.concatenate(
        [np.arange(s, e + 1, dtype=np.uint32) for s, e in zip(starts, ends, strict=True)]
    )


def _check_cardinality(r: Reader, key: int, declared: int, held: int) -> None:
    if declared != held:
        raise CorruptionError(
            f"{r.where}: container {key} holds {held} values, its header says {declared}"
        )


def encode64(rows: np.ndarray) -> bytes:
    """The portable 64-bit bitmap of positions ``rows`` (any order, any duplicates)."""
    rows = np.unique(np.asarray(rows, dtype=np.uint64))
    highs = (rows >> np.uint64(32)).astype(np.uint32)
    keys, starts = np.unique(highs, return_index=True)
    bounds = [*starts.tolist(), len(rows)]
    out = [struct.pack("<q", len(keys))]
    for i, key in enumerate(keys.tolist()):
        if key & 0x80000000:
            raise ValueError(f"row position {int(rows[bounds[i]])} is out of range")
        low = (rows[bounds[i] : bounds[i + 1]] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        out.append(struct.pack("<I", key))
        out.append(encode32(low))
    return b"".join(out)


def encode32(values: np.ndarray) -> bytes:
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
