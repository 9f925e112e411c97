"""Crafted bytes for the decoders' tests: Roaring bitmaps made of run containers (the
shape that holds the most positions in the fewest bytes: a container's 65,536 slots in
6 bytes), and Avro container files whose block counts and sizes say what the test
wants."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

WITH_RUNS, NO_RUNS = 12347, 12346
FULL_RUN = (0, 0xFFFF)
"""A run over a whole container: start 0, length - 1 = 65535."""


def runs32(containers: list[tuple[int, list[tuple[int, int]]]], card: int | None = None) -> bytes:
    """A portable 32-bit bitmap of run containers ``(key, [(start, length - 1), ...])``,
    each declaring ``card`` values in its header (default: what its runs hold)."""
    size = len(containers)
    out = [struct.pack("<I", WITH_RUNS | (size - 1) << 16), b"\xff" * ((size + 7) // 8)]
    for key, runs in containers:
        held = sum(n + 1 for _, n in runs)
        out.append(struct.pack("<HH", key, (card if card is not None else held) - 1))
    if size >= 4:
        out.append(b"\0" * 4 * size)  # offsets, which readers skip
    for _, runs in containers:
        out.append(struct.pack("<H", len(runs)))
        out.extend(struct.pack("<HH", s, n) for s, n in runs)
    return b"".join(out)


def bitmap64(body32: bytes) -> bytes:
    """A portable 64-bit bitmap of one bucket (high key 0) holding ``body32``."""
    return struct.pack("<qI", 1, 0) + body32


def full_containers(count: int) -> bytes:
    """A 64-bit bitmap of ``count`` full run containers: ``count * 65536`` positions."""
    return bitmap64(runs32([(k, [FULL_RUN]) for k in range(count)]))


def zigzag(n: int) -> bytes:
    """Avro's zig-zag varint of a long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            return bytes(out + bytes([z]))
        out.append((z & 0x7F) | 0x80)
        z >>= 7


SYNC = b"0123456789abcdef"


def avro_container(schema: dict[str, Any], blocks: list[tuple[int, bytes]], codec: str) -> bytes:
    """An Avro container file: ``schema`` in its header, then ``(record count, bytes)``
    blocks exactly as given (the counts need not match the bytes)."""
    meta = {
        "avro.schema": json.dumps(schema, separators=(",", ":")).encode(),
        "avro.codec": codec.encode(),
    }
    out = bytearray(b"Obj\x01" + zigzag(len(meta)))
    for key, value in meta.items():
        out += zigzag(len(key)) + key.encode() + zigzag(len(value)) + value
    out += zigzag(0) + SYNC
    for count, data in blocks:
        out += zigzag(count) + zigzag(len(data)) + data + SYNC
    return bytes(out)


def deflate_zeros(size: int) -> bytes:
    """Raw deflate (Avro's ``deflate`` codec) of ``size`` zero bytes, made 1 MiB at a
    time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1 << 20)
    out = [
        packer.compress(chunk[: min(len(chunk), size - done)])
        for done in range(0, size, len(chunk))
    ]
    return b"".join([*out, packer.flush()])
