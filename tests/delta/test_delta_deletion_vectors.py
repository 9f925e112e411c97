"""Deletion vector encoding: Delta's RoaringBitmapArray against CRoaring (pyroaring) and
the protocol's own examples, Z85, and the descriptor's derived path.

Tests stream_sink.delta.roaring: Delta's RoaringBitmapArray."""

from __future__ import annotations

import struct
import tracemalloc

import numpy as np
import pyroaring
import pytest
from crafted import full_containers

from stream_sink.delta import roaring
from stream_sink.delta.deletion_vectors import deleted_rows, dv_location, z85_decode, z85_encode
from stream_sink.exceptions import CorruptionError
from stream_sink.io import FileIO

CASES = {
    "few": [3, 4, 7, 11, 18, 29],
    "bitmap container": list(range(0, 200_000, 3)),
    "runs": [*range(1000, 9000), 70_000],
    "above 2**32": [1, 2**32 + 5, 2**33, 2**40],
    "empty": [],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip_and_cross_check_with_croaring(name):
    rows = CASES[name]
    assert roaring.decode(roaring.encode(np.array(rows, np.uint64))).tolist() == sorted(rows)
    low = [r for r in rows if r < 2**32]
    bm = pyroaring.BitMap(low)
    bm.run_optimize()  # run containers too
    ours = struct.pack("<i", roaring.MAGIC) + struct.pack("<q", 1 if low else 0)
    ours += (struct.pack("<I", 0) + bm.serialize()) if low else b""
    assert roaring.decode(ours).tolist() == low
    if low:  # and CRoaring reads our 32-bit bitmap
        encoded = roaring.encode(np.array(low, np.uint64))
        assert list(pyroaring.BitMap.deserialize(encoded[16:])) == low


def test_the_protocols_inline_example_decodes_to_its_rows():
    data = z85_decode("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L")[:40]
    assert roaring.decode(data).tolist() == [3, 4, 7, 11, 18, 29]


def test_the_protocols_relative_path_example():
    dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^"}
    assert dv_location("s3://mytable", dv) == (
        "s3://mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    assert z85_decode(z85_encode(b"\x01\x02\x03\x04")) == b"\x01\x02\x03\x04"


def test_a_group_above_32_bits_keeps_its_low_32_bits_as_deltas_java_decoder_does():
    value = 82 * 85**4 + 84 * (85**3 + 85**2 + 85 + 1)  # "%####": above 2**32 - 1
    assert z85_decode("%####") == struct.pack(">I", value - 2**32)
    assert z85_decode("#00000000a") == struct.pack(">II", 84 * 85**4 - 2**32, 10)


def test_a_last_group_led_by_hashes_is_the_z85_crates_padded_tail():
    # "##0l7": two bytes missing, the tail's bytes 0x07 0x00 as the number 0x0700
    assert z85_decode("00000##0l7") == b"\0\0\0\0\x07\x00"
    assert z85_decode("#0000") == b"\0\0\0"
    with pytest.raises(CorruptionError, match="the padded tail '#####' holds no bytes"):
        z85_decode("#####")
    with pytest.raises(CorruptionError, match="the padded tail '###zz' holds no bytes"):
        z85_decode("###zz")  # 35 * 85 + 35 does not fit in one byte


def test_text_that_is_not_z85_is_refused_naming_where():
    with pytest.raises(CorruptionError, match=r"t\.parquet: '~' at 0 is not a Z85 character"):
        z85_decode("~0000", "t.parquet")
    with pytest.raises(CorruptionError, match="length 4 is not a multiple of 5"):
        z85_decode("0000")
    with pytest.raises(CorruptionError, match="shorter than the 20 characters"):
        dv_location("/t", {"storageType": "u", "pathOrInlineDv": "abc"})


def test_garbage_is_refused():
    with pytest.raises(CorruptionError, match="magic number"):
        roaring.decode(b"\x00" * 16)
    with pytest.raises(CorruptionError, match="ends early"):
        roaring.decode(roaring.encode(np.array([1, 2, 3], np.uint64))[:-2])


def test_an_inline_vector_holding_more_rows_than_its_descriptor_stops_before_expanding(
    tmp_path,
):
    """Eighty full run containers (5.2 million rows) inline, the descriptor saying 3."""
    data = struct.pack("<i", roaring.MAGIC) + full_containers(80)
    dv = {"storageType": "i", "pathOrInlineDv": z85_encode(data), "sizeInBytes": len(data)}
    tracemalloc.start()
    try:
        with pytest.raises(CorruptionError, match="at most 3 remain"):
            deleted_rows(str(tmp_path), FileIO(), {**dv, "cardinality": 3}, "version 4")
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
    rows = deleted_rows(str(tmp_path), FileIO(), {**dv, "cardinality": 80 * 65536}, "v4")
    assert len(rows) == 80 * 65536


@pytest.mark.parametrize(
    "dv",
    [
        {"storageType": "i", "pathOrInlineDv": "~~~~~", "sizeInBytes": 4, "cardinality": 1},
        {"storageType": "i", "pathOrInlineDv": "00000", "sizeInBytes": 1e400},
        {"storageType": "i", "pathOrInlineDv": "00000", "sizeInBytes": [4]},
        {"storageType": "u", "pathOrInlineDv": "ab" + "~" * 20, "sizeInBytes": 4},
        {"storageType": "p", "pathOrInlineDv": "x.bin", "sizeInBytes": 4, "offset": "one"},
        {"storageType": "p", "pathOrInlineDv": "x.bin", "sizeInBytes": -4},
    ],
    ids=["not Z85", "size too large", "size a list", "uuid not Z85", "offset a word",
         "negative size"],
)  # fmt: skip
def test_a_malformed_descriptor_is_refused_naming_where(tmp_path, dv):
    with pytest.raises(CorruptionError) as e:
        deleted_rows(str(tmp_path), FileIO(), dv, "Delta table t, version 4")
    assert "version 4" in str(e.value) or str(tmp_path) in str(e.value)
