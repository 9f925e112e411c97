"""Puffin files and ``deletion-vector-v1`` blobs: written and read by our code, the
layout the spec fixes (magics, big-endian length and CRC, portable 64-bit Roaring), and
every kind of damage refused naming the file."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from stream_sink.exceptions import CorruptDeleteFileError, UnsupportedError
from stream_sink.io import FileIO
from stream_sink.table.deletion_vectors import (
    DV_MAGIC,
    VectorFor,
    deserialize,
    read_deletion_vector,
    serialize,
    write_deletion_vectors,
)
from stream_sink.table.manifest import FileFormat
from stream_sink.table.puffin import MAGIC, parse_footer, puffin_bytes


def write(tmp_path: Path, vectors: dict[str, list[int]]) -> list:
    io = FileIO.for_location(str(tmp_path))
    return write_deletion_vectors(
        io,
        str(tmp_path / "dv.puffin"),
        [VectorFor(p, 0, (), np.array(v, dtype=np.uint64)) for p, v in vectors.items()],
    )


def test_vectors_round_trip_through_one_puffin_file(tmp_path: Path) -> None:
    big = [0, 1, 5, 4095, 70_000, (1 << 32) + 3, (5 << 32) + 9]  # several 32-bit buckets
    dense = list(range(10_000))  # a bitmap container (more than 4096 values in one)
    files = write(tmp_path, {"/d/a.parquet": big, "/d/b.parquet": dense})
    io = FileIO.for_location(str(tmp_path))
    a, b = files
    assert a.file_format == FileFormat.PUFFIN and a.is_deletion_vector
    assert (a.referenced_data_file, a.record_count) == ("/d/a.parquet", len(big))
    assert a.file_path == b.file_path and a.content_offset == 4  # right after the magic
    assert read_deletion_vector(io, a).tolist() == big
    assert read_deletion_vector(io, b).tolist() == dense
    data = (tmp_path / "dv.puffin").read_bytes()
    assert data[:4] == data[-4:] == MAGIC == b"PFA1"
    (blob_a, blob_b) = parse_footer(data, "dv.puffin")
    assert blob_a.type == "deletion-vector-v1" and blob_a.fields == (2147483645,)
    assert (blob_a.snapshot_id, blob_a.sequence_number) == (-1, -1)
    assert blob_a.properties == {"referenced-data-file": "/d/a.parquet", "cardinality": "7"}
    assert (blob_b.offset, blob_b.length) == (b.content_offset, b.content_size_in_bytes)


def test_the_blob_layout_is_the_specs() -> None:
    blob = serialize(np.array([3, 1, 3], dtype=np.uint64))
    (length,) = struct.unpack(">I", blob[:4])
    assert length == len(blob) - 8 and blob[4:8] == DV_MAGIC == bytes.fromhex("d1d33964")
    assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])
    assert struct.unpack("<q", blob[8:16])[0] == 1  # one 32-bit bucket, little endian
    assert deserialize(blob, "x").tolist() == [1, 3]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:4] + b"\0\0\0\0" + b[8:], "bad deletion vector magic"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC-32"),
        (lambda b: struct.pack(">I", 3) + b[4:], "length field"),
    ],
)
def test_a_damaged_blob_is_refused_naming_the_file(
    tmp_path: Path, damage: object, message: str
) -> None:
    (f,) = write(tmp_path, {"/d/a.parquet": [1, 2]})
    path = tmp_path / "dv.puffin"
    data = bytearray(path.read_bytes())
    start, end = f.content_offset, f.content_offset + f.content_size_in_bytes
    data[start:end] = damage(bytes(data[start:end]))  # type: ignore[operator]
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptDeleteFileError, match=message) as e:
        read_deletion_vector(FileIO.for_location(str(tmp_path)), f)
    assert str(path) in str(e.value) and "/d/a.parquet" in str(e.value)


def test_a_cardinality_that_disagrees_with_the_entry_is_refused(tmp_path: Path) -> None:
    from dataclasses import replace

    (f,) = write(tmp_path, {"/d/a.parquet": [1, 2]})
    with pytest.raises(CorruptDeleteFileError, match=r"holds 2 positions.*says 3"):
        read_deletion_vector(FileIO.for_location(str(tmp_path)), replace(f, record_count=3))


def test_puffin_footers_with_damage_are_refused_naming_the_file() -> None:
    data, _ = puffin_bytes([])
    assert parse_footer(data, "ok.puffin") == []
    with pytest.raises(CorruptDeleteFileError, match=r"bad\.puffin has no Puffin magic"):
        parse_footer(b"XXXX" + data[4:], "bad.puffin")
    with pytest.raises(CorruptDeleteFileError, match="says 3"):
        parse_footer(data, "short.puffin", file_size=3)
    payload = json.dumps({"blobs": [{"type": "t", "fields": [], "offset": 4, "length": 99}]})
    raw = payload.encode()
    bad = MAGIC + MAGIC + raw + struct.pack("<i", len(raw)) + bytes(4) + MAGIC
    with pytest.raises(CorruptDeleteFileError, match="outside"):
        parse_footer(bad, "far.puffin")
    compressed = data[:-8] + b"\x01\0\0\0" + MAGIC
    with pytest.raises(UnsupportedError, match="LZ4"):
        parse_footer(compressed, "lz4.puffin")


@pytest.mark.parametrize(
    "footer",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"blobs": [{"type": "x", "fields": [], "offset": 1e400, "length": 1}]}',
        '{"blobs": [{"type": "x", "fields": [], "offset": 4, "length": 0, "properties": [1]}]}',
        '{"blobs": [{"type": "x", "fields": [1e400], "offset": 4, "length": 0}]}',
    ],
    ids=["nested past the recursion limit", "offset 1e400", "properties a list",
         "field id 1e400"],
)  # fmt: skip
def test_a_crafted_puffin_footer_is_refused_naming_the_file(footer: str) -> None:
    payload = footer.encode()
    data = MAGIC + MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4) + MAGIC
    with pytest.raises(CorruptDeleteFileError, match=r"Puffin file crafted\.puffin"):
        parse_footer(data, "crafted.puffin")
