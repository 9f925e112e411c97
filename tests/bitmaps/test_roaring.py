"""Crafted Roaring bitmaps (the portable format both deletion vector kinds embed): every
count is bounded by the bytes that hold it and by the cardinality the caller expects,
and a bitmap that claims more stops before anything is expanded."""

from __future__ import annotations

import struct
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from crafted import FULL_RUN, NO_RUNS, bitmap64, full_containers, runs32

from stream_sink.bitmaps.roaring import Reader, decode64, encode64
from stream_sink.delta import roaring as delta_roaring
from stream_sink.exceptions import CorruptDeleteFileError, CorruptionError
from stream_sink.io import FileIO
from stream_sink.table.deletion_vectors import (
    BLOB_TYPE,
    DV_MAGIC,
    ROW_POSITION_FIELD_ID,
    read_deletion_vector,
)
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.table.puffin import NewBlob, puffin_bytes


def blob(bitmap: bytes) -> bytes:
    """Iceberg's ``deletion-vector-v1`` blob around a 64-bit bitmap."""
    body = DV_MAGIC + bitmap
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def read_vector(tmp_path: Path, crafted: bytes, record_count: int) -> np.ndarray:
    """The positions of ``crafted`` (a blob) in a Puffin file whose manifest entry
    declares ``record_count`` positions, read as a scan reads a deletion vector."""
    data, (meta,) = puffin_bytes([NewBlob(BLOB_TYPE, (ROW_POSITION_FIELD_ID,), crafted)])
    (tmp_path / "dv.puffin").write_bytes(data)
    entry = DataFile(
        content=DataFileContent.POSITION_DELETES,
        file_path=str(tmp_path / "dv.puffin"),
        file_format=FileFormat.PUFFIN,
        spec_id=0,
        partition=(),
        record_count=record_count,
        file_size_in_bytes=len(data),
        referenced_data_file="/d/a.parquet",
        content_offset=meta.offset,
        content_size_in_bytes=meta.length,
    )
    return read_deletion_vector(FileIO.for_location(str(tmp_path)), entry)


def peak_bytes(call: Callable[[], object]) -> int:
    """The most memory ``call`` allocated at once (numpy's arrays included)."""
    tracemalloc.start()
    try:
        with pytest.raises(CorruptionError):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_835_byte_vector_of_overlapping_runs_is_refused_not_expanded(tmp_path: Path) -> None:
    """200 runs over one container's 65,536 slots: 13.1 million positions unbounded."""
    crafted = blob(bitmap64(runs32([(0, [FULL_RUN] * 200)], card=65536)))
    assert len(crafted) == 835
    with pytest.raises(CorruptDeleteFileError, match="overlap") as e:
        read_vector(tmp_path, crafted, record_count=200 * 65536)
    assert "dv.puffin" in str(e.value) and "/d/a.parquet" in str(e.value)
    assert peak_bytes(lambda: read_vector(tmp_path, crafted, 200 * 65536)) < 1 << 20


def test_a_run_past_its_containers_slots_is_refused() -> None:
    crafted = bitmap64(runs32([(0, [(0xFFF0, 0x100)])], card=0x101))
    with pytest.raises(CorruptionError, match="65536 slots"):
        decode64(Reader(crafted, "dv"))


def test_containers_declaring_more_than_the_expected_cardinality_stop_before_expanding(
    tmp_path: Path,
) -> None:
    """Eighty well-formed full containers (5.2 million positions in 1,158 bytes) where
    the manifest entry declares 3 positions."""
    crafted = blob(full_containers(80))
    assert len(crafted) == 1158
    with pytest.raises(CorruptDeleteFileError, match="at most 3 remain"):
        read_vector(tmp_path, crafted, record_count=3)
    assert peak_bytes(lambda: read_vector(tmp_path, crafted, record_count=3)) < 1 << 20
    assert len(read_vector(tmp_path, crafted, record_count=80 * 65536)) == 80 * 65536


def test_a_declared_cardinality_that_disagrees_with_the_runs_is_refused() -> None:
    crafted = bitmap64(runs32([(0, [(0, 9)])], card=3))
    with pytest.raises(CorruptionError, match="holds 10 values, its header says 3"):
        decode64(Reader(crafted, "dv"))


@pytest.mark.parametrize(
    ("crafted", "message"),
    [
        (struct.pack("<q", 1 << 62), "claims 4611686018427387904 buckets"),
        (struct.pack("<q", -1), "claims -1 buckets"),
        (struct.pack("<qII", 1, 0, NO_RUNS) + struct.pack("<I", 0xFFFFFFFF), "containers"),
        (struct.pack("<qIII", 1, 0, NO_RUNS, 2) + struct.pack("<HHHH", 5, 0, 5, 0), "keys"),
        (struct.pack("<qIII", 1, 0, NO_RUNS, 1) + struct.pack("<HH", 0, 1) + b"\0" * 4
         + struct.pack("<HH", 7, 7), "not ascending"),
    ],
    ids=["huge bucket count", "negative bucket count", "2**32 containers",
         "repeated container key", "repeated array value"],
)  # fmt: skip
def test_counts_beyond_the_bytes_and_unordered_keys_are_refused(
    crafted: bytes, message: str
) -> None:
    with pytest.raises(CorruptionError, match=message):
        decode64(Reader(crafted, "dv"))


def test_deltas_native_layout_bounds_its_count_and_sizes() -> None:
    native = struct.pack(">i", delta_roaring.NATIVE_MAGIC)
    with pytest.raises(CorruptionError, match="claims 2147483647 32-bit bitmaps"):
        delta_roaring.decode(native + struct.pack(">i", 2**31 - 1))
    with pytest.raises(CorruptionError, match="ends early"):
        delta_roaring.decode(native + struct.pack(">ii", 1, -8) + b"\0" * 16)


def test_what_the_encoder_writes_decodes_within_its_own_cardinality(tmp_path: Path) -> None:
    rows = np.array([0, 3, *range(10_000, 20_000), (7 << 32) + 1], np.uint64)
    crafted = blob(encode64(rows))
    assert read_vector(tmp_path, crafted, len(rows)).tolist() == rows.tolist()
    with pytest.raises(CorruptDeleteFileError, match="remain"):
        read_vector(tmp_path, crafted, len(rows) - 1)
