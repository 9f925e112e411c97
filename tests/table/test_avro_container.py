"""Avro container files as the metadata readers see them, whatever codec and block layout
the writer chose: records under the writer's names, logical types left undecoded."""

from __future__ import annotations

import io
from pathlib import Path

import fastavro
import pytest

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
