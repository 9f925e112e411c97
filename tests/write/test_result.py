"""WriteResult: merging and the versioned binary form."""

from __future__ import annotations

import math
import pickle
import zlib
from decimal import Decimal

import pytest

from stream_sink.exceptions import CorruptionError, UnsupportedError
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.write.result import ENVELOPE, MAGIC, WriteResult


def every_field() -> DataFile:
    return DataFile(
        content=DataFileContent.EQUALITY_DELETES,
        file_path="s3://bucket/wh/db/t/data/ts_day=2024-01-01/00001-2-op-0-00003.parquet",
        file_format=FileFormat.PARQUET,
        spec_id=3,
        partition=(19000, None, "ünï", b"\x00\xff", Decimal("-12.50"), -0.0, True, 2**40),
        record_count=12345,
        file_size_in_bytes=987654,
        column_sizes={1: 100, 2: 200},
        value_counts={1: 12345, 2: 12000},
        null_value_counts={1: 0, 2: 345},
        nan_value_counts={3: 7},
        lower_bounds={1: b"\x01\x00\x00\x00", 2: b"", 3: b"\xff" * 16},
        upper_bounds={1: b"\x7f\x00\x00\x00", 2: b"zzz"},
        key_metadata=b"key",
        split_offsets=(4, 1048580),
        equality_ids=(1, 2),
        sort_order_id=0,
        referenced_data_file="s3://bucket/wh/db/t/data/a.parquet",
    )


def minimal() -> DataFile:
    return DataFile(
        content=DataFileContent.DATA,
        file_path="/wh/t/data/a.parquet",
        file_format=FileFormat.PARQUET,
        spec_id=0,
        partition=(),
        record_count=1,
        file_size_in_bytes=10,
    )


def test_round_trip_keeps_every_field() -> None:
    result = WriteResult((minimal(),), (every_field(),), ("/wh/t/data/a.parquet",))
    raw = result.to_bytes()
    assert raw.startswith(MAGIC)
    back = WriteResult.from_bytes(raw)
    assert back == result
    got = back.delete_files[0]
    assert type(got.partition[4]) is Decimal and str(got.partition[4]) == "-12.50"
    assert math.copysign(1.0, got.partition[5]) == -1.0
    assert got.content is DataFileContent.EQUALITY_DELETES


def test_nan_partition_value_survives() -> None:
    f = DataFile(
        content=DataFileContent.DATA,
        file_path="x",
        file_format=FileFormat.PARQUET,
        spec_id=0,
        partition=(float("nan"), float("inf")),
        record_count=1,
        file_size_in_bytes=1,
    )
    back = WriteResult.from_bytes(WriteResult((f,)).to_bytes()).data_files[0]
    assert math.isnan(back.partition[0]) and back.partition[1] == math.inf


def test_empty_result_round_trips_and_is_small() -> None:
    raw = WriteResult().to_bytes()
    assert WriteResult.from_bytes(raw) == WriteResult()
    assert WriteResult().is_empty
    assert len(raw) < 64


def test_binary_form_is_smaller_than_pickle() -> None:
    result = WriteResult(tuple(every_field() for _ in range(50)))
    assert len(result.to_bytes()) < len(pickle.dumps(result))


def test_merge_concatenates_and_deduplicates_references() -> None:
    a = WriteResult((minimal(),), (), ("p1",))
    b = WriteResult((), (every_field(),), ("p1", "p2"))
    merged = WriteResult.merge([a, b, WriteResult()])
    assert merged.data_files == (minimal(),)
    assert merged.delete_files == (every_field(),)
    assert merged.referenced_data_files == ("p1", "p2")
    assert merged.all_paths() == [minimal().file_path, every_field().file_path]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "not a serialized WriteResult"),
        (b"XXXX\x01abc", "not a serialized WriteResult"),
        (MAGIC + b"\x00\x00" + zlib.compress(b"{}"), "version 0"),
        (MAGIC + b"\x00\x01" + b"garbage", "damaged"),
        (MAGIC + b"\x01" + b"garbage", "damaged"),
        (
            MAGIC
            + b"\x01"
            + zlib.compress(b'{"data": [{"nope": 1}], "deletes": [], "referenced": []}'),
            "damaged",
        ),
    ],
)
def test_damaged_bytes_are_refused(raw: bytes, message: str) -> None:
    with pytest.raises(CorruptionError, match=message):
        WriteResult.from_bytes(raw)


def test_a_newer_version_is_unsupported_not_corrupt() -> None:
    with pytest.raises(UnsupportedError, match="format version 9"):
        WriteResult.from_bytes(MAGIC + b"\x00\x09" + zlib.compress(b"{}"))


def test_bytes_from_before_the_common_envelope_are_read() -> None:
    result = WriteResult((every_field(),), (), ("p",))
    legacy = MAGIC + b"\x01" + ENVELOPE.payload(result.to_bytes(), where="w")
    assert WriteResult.from_bytes(legacy) == result


def test_truncated_bytes_are_refused() -> None:
    raw = WriteResult((every_field(),)).to_bytes()
    with pytest.raises(CorruptionError):
        WriteResult.from_bytes(raw[: len(raw) // 2])
