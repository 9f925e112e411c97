"""Deletion vectors (v3): the ``deletion-vector-v1`` Puffin blob and its manifest entry.

A blob is the big-endian length of magic + vector, the magic ``D1 D3 39 64``, the
positions as a portable 64-bit Roaring bitmap (:mod:`stream_sink.bitmaps.roaring`),
then the big-endian CRC-32 of magic + vector. Its footer metadata covers field
``_pos`` (2147483645) with properties ``referenced-data-file`` and ``cardinality``.
The manifest entry is a position delete in format PUFFIN whose ``record_count`` is the
cardinality, with ``referenced_data_file``, ``content_offset`` and
``content_size_in_bytes`` pointing at the blob.

Invariants:
- Reading checks the length, magic, CRC and that the cardinality equals the entry's
  ``record_count``; any mismatch raises CorruptDeleteFileError naming the Puffin file
  and the data file, and nothing of the vector is applied. A vector whose containers
  declare more positions than ``record_count`` stops before any is expanded.
- One Puffin file may hold vectors of many data files; each gets its own entry.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stream_sink.bitmaps.roaring import Reader, decode64, encode64
from stream_sink.exceptions import CorruptDeleteFileError, CorruptionError, MissingFileError
from stream_sink.io.fileio import FileIO
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.table.puffin import NewBlob, write_puffin

BLOB_TYPE = "deletion-vector-v1"
DV_MAGIC = b"\xd1\xd3\x39\x64"
ROW_POSITION_FIELD_ID = 2147483645
REFERENCED_DATA_FILE = "referenced-data-file"
CARDINALITY = "cardinality"


def serialize(positions: np.ndarray) -> bytes:
    """The ``deletion-vector-v1`` blob of row ``positions`` (any order, duplicates ok)."""
    body = DV_MAGIC + encode64(positions)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def deserialize(blob: bytes, where: str, cardinality: int | None = None) -> np.ndarray:
    """The positions (sorted uint64) of a ``deletion-vector-v1`` blob; a vector declaring
    more than ``cardinality`` positions is refused before any is expanded."""
    if len(blob) < 12:
        raise CorruptDeleteFileError(f"{where}: the deletion vector is only {len(blob)} bytes")
    (length,) = struct.unpack(">I", blob[:4])
    if length != len(blob) - 8:
        raise CorruptDeleteFileError(
            f"{where}: the deletion vector's length field says {length} bytes, "
            f"the blob holds {len(blob) - 8}"
        )
    body = blob[4 : 4 + length]
    if body[:4] != DV_MAGIC:
        raise CorruptDeleteFileError(
            f"{where}: bad deletion vector magic {body[:4].hex()} (expected d1d33964)"
        )
    (crc,) = struct.unpack(">I", blob[4 + length :])
    if zlib.crc32(body) != crc:
        raise CorruptDeleteFileError(
            f"{where}: the deletion vector's CRC-32 {crc:08x} does not match its bytes "
            f"({zlib.crc32(body):08x})"
        )
    reader = Reader(body, where)
    reader.take(4)
    try:
        positions = decode64(reader, cardinality)
    except CorruptionError as e:
        raise CorruptDeleteFileError(str(e)) from e
    if reader.pos != len(body):
        raise CorruptDeleteFileError(f"{where}: {len(body) - reader.pos} bytes after the bitmap")
    return positions


def read_deletion_vector(io: FileIO, dv: DataFile) -> np.ndarray:
    """The positions ``dv`` (a deletion-vector entry) deletes in its data file."""
    where = f"deletion vector for {dv.referenced_data_file} in Puffin file {dv.file_path}"
    if dv.content_offset is None or dv.content_size_in_bytes is None:
        raise CorruptDeleteFileError(f"{where}: the entry lacks content_offset/content_size")
    try:
        with io.open_input(dv.file_path) as f:
            blob = f.read_at(dv.content_size_in_bytes, dv.content_offset)
    except MissingFileError as e:
        raise MissingFileError(f"{where}: the Puffin file is missing ({e})") from e
    if len(blob) != dv.content_size_in_bytes:
        raise CorruptDeleteFileError(
            f"{where}: the file ends before the blob's {dv.content_size_in_bytes} bytes "
            f"at offset {dv.content_offset}"
        )
    positions = deserialize(blob, where, dv.record_count)
    if len(positions) != dv.record_count:
        raise CorruptDeleteFileError(
            f"{where}: the vector holds {len(positions)} positions, its manifest entry "
            f"says {dv.record_count} (cardinality)"
        )
    return positions


@dataclass(frozen=True)
class VectorFor:
    """The positions to delete in one data file (its spec and partition go on the entry)."""

    data_file: str
    spec_id: int
    partition: tuple[object, ...]
    positions: np.ndarray


def write_deletion_vectors(
    io: FileIO, location: str, vectors: Sequence[VectorFor]
) -> list[DataFile]:
    """One Puffin file at ``location`` with a vector per data file (each data file at
    most once); the delete-file entries that name them. Empty vectors are skipped."""
    kept = [v for v in vectors if len(v.positions)]
    paths = [v.data_file for v in kept]
    if len(set(paths)) != len(paths):
        raise ValueError("at most one deletion vector per data file in a Puffin file")
    if not kept:
        return []
    blobs, counts = [], []
    for v in kept:
        positions = np.unique(np.asarray(v.positions, dtype=np.uint64))
        counts.append(len(positions))
        props = {REFERENCED_DATA_FILE: v.data_file, CARDINALITY: str(len(positions))}
        blobs.append(NewBlob(BLOB_TYPE, (ROW_POSITION_FIELD_ID,), serialize(positions), props))
    size, metas = write_puffin(io, location, blobs)
    return [
        DataFile(
            content=DataFileContent.POSITION_DELETES,
            file_path=location,
            file_format=FileFormat.PUFFIN,
            spec_id=v.spec_id,
            partition=v.partition,
            record_count=count,
            file_size_in_bytes=size,
            referenced_data_file=v.data_file,
            content_offset=m.offset,
            content_size_in_bytes=m.length,
        )
        for v, m, count in zip(kept, metas, counts, strict=True)
    ]
