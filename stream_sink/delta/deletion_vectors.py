"""Deletion vectors (PROTOCOL.md "Deletion Vectors"): reading the rows a descriptor
deletes, and writing new deletion vector files.

A descriptor's ``storageType`` says where the ``RoaringBitmapArray`` is: ``i`` inline
(Z85 in ``pathOrInlineDv``), ``u`` in ``<table>/<prefix>/deletion_vector_<uuid>.bin``
(``pathOrInlineDv`` = random prefix + the Z85 of the UUID's 16 bytes), ``p`` at an
absolute path. A file holds a version byte (1), then per vector its big-endian size,
the bitmap and its big-endian CRC-32; ``offset`` points at the size.
Invariants: a vector whose size, checksum or cardinality disagree with its descriptor is
refused (CorruptionError naming the file), never half-applied.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from stream_sink.exceptions import DECODE_ERRORS, CorruptionError, UnsupportedError
from stream_sink.io.fileio import FileIO

from . import roaring
from .paths import absolute_location

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(Z85)}
FILE_VERSION = 1


def z85_decode(text: str, where: str = "Z85 text") -> bytes:
    """The bytes of Z85 ``text`` (PROTOCOL.md: Delta's 4-byte-block Base85 with Z85's
    alphabet). Each group of 5 characters is a base-85 number holding 4 bytes, big endian.

    Two kinds of group hold more than 32 bits, which Delta's own encoder (Java's
    ``Base85Codec``: an unaligned tail padded with zero bytes) never writes:

    - A last group starting with ``#`` is the padded tail of the Rust ``z85`` crate, which
      delta-rs and delta-kernel-rs encode with: each leading ``#`` stands for a ``0`` digit
      and a byte missing from the tail, and the group's number is the tail's remaining
      bytes, right-aligned. delta-kernel-rs (and so delta-rs and DuckDB) decodes it so; a
      group starting with ``#`` is at least 84 * 85**4 > 2**32 - 1, so no 4-byte group
      reads that way. Taken modulo 2**32 instead, its bytes would name other rows.
    - Any other group above 2**32 - 1 keeps its low 32 bits, as Java's decoder does
      (``sum.toInt``).

    CorruptionError naming ``where`` for a length not a multiple of 5, a character
    outside the alphabet, or a tail whose number does not fit its bytes."""
    if len(text) % 5:
        raise CorruptionError(f"{where}: Z85 text of length {len(text)} is not a multiple of 5")
    out = bytearray()
    for i in range(0, len(text), 5):
        group = text[i : i + 5]
        missing = len(group) - len(group.lstrip("#")) if i == len(text) - 5 else 0
        value = _z85_number("0" * missing + group[missing:], where, i)
        if missing:
            if missing > 3 or value >= 256 ** (4 - missing):
                raise CorruptionError(f"{where}: the padded tail {group!r} holds no bytes")
            out += struct.pack(">I", value)[missing:]
        else:
            out += struct.pack(">I", value & 0xFFFFFFFF)
    return bytes(out)


def _z85_number(group: str, where: str, at: int) -> int:
    value = 0
    for j, c in enumerate(group):
        digit = _Z85_INDEX.get(c)
        if digit is None:
            raise CorruptionError(f"{where}: {c!r} at {at + j} is not a Z85 character")
        value = value * 85 + digit
    return value


def z85_encode(data: bytes) -> str:
    """Z85 of ``data`` (zero-padded to a multiple of 4 bytes, as Delta pads)."""
    data = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        (value,) = struct.unpack(">I", data[i : i + 4])
        chunk = []
        for _ in range(5):
            value, r = divmod(value, 85)
            chunk.append(Z85[r])
        out.append("".join(reversed(chunk)))
    return "".join(out)


def dv_location(table_location: str, dv: Mapping[str, Any]) -> str:
    """The file a ``u`` or ``p`` descriptor points at."""
    kind, raw = dv.get("storageType"), str(dv.get("pathOrInlineDv"))
    if kind == "p":
        return absolute_location(table_location, raw)
    if kind == "u":
        prefix, encoded = raw[:-20], raw[-20:]
        where = f"Delta table {table_location}: deletion vector path {raw!r}"
        if len(encoded) != 20:
            raise CorruptionError(f"{where}: shorter than the 20 characters of a file id")
        file_id = uuid.UUID(bytes=z85_decode(encoded, where))
        name = f"deletion_vector_{file_id}.bin"
        rel = f"{prefix}/{name}" if prefix else name
        return f"{table_location.rstrip('/')}/{rel}"
    raise UnsupportedError(f"deletion vector storage type {kind!r} is not one of u, i, p")


def deleted_rows(table_location: str, io: FileIO, dv: Mapping[str, Any], where: str) -> np.ndarray:
    """The positions (sorted uint64) of the rows ``dv`` deletes; a vector holding more
    rows than the descriptor's cardinality stops before they are expanded."""
    size, offset, expected = _numbers(dv, where)
    if dv.get("storageType") == "i":
        location = f"{where} (inline deletion vector)"
        data = z85_decode(str(dv["pathOrInlineDv"]), location)[:size]
    else:
        location = dv_location(table_location, dv)
        data = _read_stored(io, location, offset, size)
    rows = roaring.decode(data, where=location, limit=expected)
    if expected is not None and expected != len(rows):
        raise CorruptionError(
            f"{location}: the deletion vector holds {len(rows)} rows, its descriptor in the "
            f"log says {expected}"
        )
    return rows


def _numbers(dv: Mapping[str, Any], where: str) -> tuple[int, int, int | None]:
    """A descriptor's ``sizeInBytes``, ``offset`` (0 when absent) and ``cardinality``
    (None when absent), each a non-negative integer."""
    try:
        size, offset = int(dv["sizeInBytes"]), int(dv.get("offset") or 0)
        expected = None if dv.get("cardinality") is None else int(dv["cardinality"])
    except DECODE_ERRORS as e:
        raise CorruptionError(
            f"{where}: malformed deletion vector descriptor {dict(dv)!r:.200} ({e!r})"
        ) from None
    if min(size, offset, expected or 0) < 0:
        raise CorruptionError(
            f"{where}: deletion vector descriptor {dict(dv)!r:.200} has a negative number"
        )
    return size, offset, expected


def _read_stored(io: FileIO, location: str, offset: int, size: int) -> bytes:
    raw = io.read_bytes(location)
    if offset + 4 + size + 4 > len(raw):
        raise CorruptionError(
            f"{location}: {len(raw)} bytes, too short for a deletion vector of {size} bytes "
            f"at offset {offset}"
        )
    (stored,) = struct.unpack(">i", raw[offset : offset + 4])
    if stored != size:
        raise CorruptionError(f"{location}: deletion vector of {stored} bytes, the log says {size}")
    data = raw[offset + 4 : offset + 4 + size]
    (crc,) = struct.unpack(">I", raw[offset + 4 + size : offset + 8 + size])
    if zlib.crc32(data) != crc:
        raise CorruptionError(f"{location}: the deletion vector's CRC-32 does not match")
    return data


def write_deletion_vector(table_location: str, io: FileIO, rows: np.ndarray) -> dict[str, Any]:
    """Write a file holding one vector of ``rows``; returns its descriptor (``u``)."""
    return write_deletion_vectors(table_location, io, [rows])[0]


def write_deletion_vectors(
    table_location: str, io: FileIO, vectors: Sequence[np.ndarray]
) -> list[dict[str, Any]]:
    """Write one file holding a vector per entry of ``vectors`` (rows of one data file
    each), one after the other as Delta's writers pack them; returns their descriptors
    (``u``, each with its own ``offset``), in order. One file per batch instead of one
    per data file keeps a commit that touches many files to one extra object."""
    file_id = uuid.uuid4()
    parts = [bytes([FILE_VERSION])]
    offset = 1
    descriptors: list[dict[str, Any]] = []
    for rows in vectors:
        data = roaring.encode(rows)
        parts += [struct.pack(">i", len(data)), data, struct.pack(">I", zlib.crc32(data))]
        descriptors.append(
            {
                "storageType": "u",
                "pathOrInlineDv": z85_encode(file_id.bytes),
                "offset": offset,
                "sizeInBytes": len(data),
                "cardinality": len(np.unique(rows)),
            }
        )
        offset += 8 + len(data)
    io.write_bytes(f"{table_location.rstrip('/')}/deletion_vector_{file_id}.bin", b"".join(parts))
    return descriptors


class VectorReader:
    """:func:`deleted_rows` of many descriptors, each vector file read once (a file of
    :func:`write_deletion_vectors` holds the vectors of a whole batch)."""

    def __init__(self, table_location: str, io: FileIO) -> None:
        self.table_location = table_location
        self._io = _CachingIO(io)

    def rows(self, dv: Mapping[str, Any], where: str) -> np.ndarray:
        return deleted_rows(self.table_location, cast(FileIO, self._io), dv, where)


class _CachingIO:
    """The one FileIO call :func:`_read_stored` makes, answered from a cache."""

    def __init__(self, io: FileIO) -> None:
        self._io = io
        self._bytes: dict[str, bytes] = {}

    def read_bytes(self, location: str) -> bytes:
        if location not in self._bytes:
            self._bytes[location] = self._io.read_bytes(location)
        return self._bytes[location]
