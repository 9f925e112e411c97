"""Avro container files as the metadata readers see them, whatever codec and block layout
the writer chose: records under the writer's names, logical types left undecoded.

Tests stream_sink.table.avro_blocks: Avro blocks decoded without trusting their counts."""

from __future__ import annotations

import bz2
import io
import lzma
import tracemalloc
from pathlib import Path

import fastavro
import pytest
from crafted import avro_container, deflate_zeros, zigzag

from stream_sink.exceptions import CorruptMetadataError
from stream_sink.io import FileIO
from stream_sink.table.avro_schemas import read_avro_file

SCHEMA = {
    "type": "record",
    "name": "r",
    "fields": [
        {"name": "id", "type": "long", "field-id": 1},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "name", "type": ["null", "string"]},
    ],
}
RECORDS = [
    {"id": i, "ts": 1_700_000_000_000_000 + i, "name": None if i % 3 else f"n{i}"}
    for i in range(250)
]


def _write(path: Path, codec: str, block_size: int) -> str:
    buf = io.BytesIO()
    fastavro.writer(
        buf, SCHEMA, RECORDS, codec=codec, sync_interval=block_size, metadata={"k": "v"}
    )
    path.write_bytes(buf.getvalue())
    return str(path)


@pytest.mark.parametrize("codec", ["null", "deflate", "bzip2"])
@pytest.mark.parametrize("block_size", [64, 1 << 16])
def test_every_codec_and_block_layout_reads_the_same_records(
    tmp_path: Path, codec: str, block_size: int
) -> None:
    location = _write(tmp_path / "f.avro", codec, block_size)
    contents = read_avro_file(FileIO.for_location(location), location)
    assert contents.records == RECORDS  # timestamps stay integers
    assert contents.metadata["k"] == "v"
    assert contents.schema["fields"][1]["type"]["logicalType"] == "timestamp-micros"


def test_a_damaged_block_is_named(tmp_path: Path) -> None:
    path = tmp_path / "f.avro"
    location = _write(path, "deflate", 64)
    data = bytearray(path.read_bytes())
    data[-40:-20] = b"\x00" * 20
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptMetadataError, match=r"f\.avro"):
        read_avro_file(FileIO.for_location(location), location)


NULLS = {"type": "record", "name": "r", "fields": [{"name": "n", "type": "null"}]}
NULL_ARRAY = {
    "type": "record",
    "name": "r",
    "fields": [{"name": "a", "type": {"type": "array", "items": "null"}}],
}
LONGS = {"type": "record", "name": "r", "fields": [{"name": "id", "type": "long"}]}


def _read_crafted(tmp_path: Path, data: bytes) -> list:
    path = tmp_path / "crafted.avro"
    path.write_bytes(data)
    return read_avro_file(FileIO.for_location(str(path)), str(path)).records


def test_a_130_byte_file_claiming_3_million_records_of_no_bytes_is_refused(tmp_path: Path) -> None:
    """Records that take no bytes: the block count alone would make 3 million of them."""
    data = avro_container(NULLS, [(3_000_000, b"")], "null")
    assert len(data) < 140
    with pytest.raises(CorruptMetadataError, match=r"crafted\.avro.*records take no bytes"):
        _read_crafted(tmp_path, data)


def test_an_array_of_items_that_take_no_bytes_is_refused(tmp_path: Path) -> None:
    body = zigzag(3_000_000) + zigzag(0)  # one record: an array of 3 million nulls
    data = avro_container(NULL_ARRAY, [(1, body)], "null")
    with pytest.raises(CorruptMetadataError, match="array whose items take no bytes"):
        _read_crafted(tmp_path, data)


def test_a_block_count_beyond_what_its_bytes_hold_stops_before_decoding(tmp_path: Path) -> None:
    body = b"".join(zigzag(i) for i in range(10))
    data = avro_container(LONGS, [(10, body), (1 << 40, body)], "null")
    with pytest.raises(CorruptMetadataError, match="claims 1099511627776 records, its 10 bytes"):
        _read_crafted(tmp_path, data)
    assert len(_read_crafted(tmp_path, avro_container(LONGS, [(10, body)], "null"))) == 10
    with pytest.raises(CorruptMetadataError, match="end at byte 5 of its 10"):
        _read_crafted(tmp_path, avro_container(LONGS, [(5, body)], "null"))


def test_a_200_kb_deflate_block_of_200_mib_is_refused_without_inflating_it(
    tmp_path: Path,
) -> None:
    bomb = deflate_zeros(200 << 20)
    assert len(bomb) < 210_000
    data = avro_container(LONGS, [(1, bomb)], "deflate")
    tracemalloc.start()
    try:
        with pytest.raises(CorruptMetadataError, match=r"inflates past 13\d+ bytes"):
            _read_crafted(tmp_path, data)
        assert tracemalloc.get_traced_memory()[1] < 32 << 20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("codec", ["bzip2", "xz"])
def test_other_codecs_are_inflated_within_the_same_bound(tmp_path: Path, codec: str) -> None:
    compress = bz2.compress if codec == "bzip2" else lzma.compress
    bomb = compress(bytes(64 << 20))
    data = avro_container(LONGS, [(1, bomb)], codec)
    with pytest.raises(CorruptMetadataError, match="inflates past"):
        _read_crafted(tmp_path, data)


def test_a_block_header_varint_longer_than_a_long_is_refused(tmp_path: Path) -> None:
    data = avro_container(LONGS, [], "null") + b"\xff" * 11 + b"\x01"
    with pytest.raises(CorruptMetadataError, match="varint runs past 10 bytes"):
        _read_crafted(tmp_path, data)
