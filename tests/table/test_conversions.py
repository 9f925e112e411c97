"""Single-value binary serialization (spec Appendix D) and bound truncation."""

from __future__ import annotations

import math
import uuid
from decimal import Decimal
from typing import Any

import pyiceberg.conversions as py_conv
import pyiceberg.types as pt
import pytest

from stream_sink.exceptions import CorruptMetadataError, ValidationError
from stream_sink.table.conversions import (
    decimal_required_bytes,
    from_bytes,
    to_bytes,
    truncate_lower,
    truncate_upper,
)
from stream_sink.table.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

UUID_TEXT = "f79c3e09-677c-4bbd-a479-3f349cb785e7"

# (type, internal value, expected bytes) — expectations written out from the spec's rules.
SPEC_EXAMPLES: list[tuple[IcebergType, Any, bytes]] = [
    (BooleanType(), True, b"\x01"),
    (BooleanType(), False, b"\x00"),
    (IntegerType(), 34, b"\x22\x00\x00\x00"),
    (IntegerType(), -1, b"\xff\xff\xff\xff"),
    (LongType(), 34, b"\x22\x00\x00\x00\x00\x00\x00\x00"),
    (LongType(), -(2**63), b"\x00\x00\x00\x00\x00\x00\x00\x80"),
    (FloatType(), 1.0, b"\x00\x00\x80\x3f"),
    (DoubleType(), 1.0, b"\x00\x00\x00\x00\x00\x00\xf0\x3f"),
    (DateType(), 17486, b"\x4e\x44\x00\x00"),  # 2017-11-16
    (TimeType(), 81_068_000_000, bytes.fromhex("008307e012000000")),  # 22:31:08
    (TimestampType(), 1_510_871_468_000_000, bytes.fromhex("00c3262d215e0500")),
    (TimestamptzType(), -1, b"\xff" * 8),
    (StringType(), "iceberg", b"iceberg"),
    (StringType(), "héllo ☃ 😀", "héllo ☃ 😀".encode()),
    (UUIDType(), uuid.UUID(UUID_TEXT).bytes, bytes.fromhex(UUID_TEXT.replace("-", ""))),
    (FixedType(3), b"\x00\x01\x02", b"\x00\x01\x02"),
    (BinaryType(), b"\x00\xff", b"\x00\xff"),
    (BinaryType(), b"", b""),
    (DecimalType(9, 2), Decimal("1.00"), b"\x64"),
    (DecimalType(9, 2), Decimal("-0.01"), b"\xff"),
    (DecimalType(9, 2), Decimal("1.28"), b"\x00\x80"),
    (DecimalType(9, 2), Decimal("-1.28"), b"\x80"),
    (DecimalType(9, 2), Decimal("0.00"), b"\x00"),
    (DecimalType(38, 0), Decimal(10**38 - 1), (10**38 - 1).to_bytes(16, "big", signed=True)),
    (
        DecimalType(38, 4),
        Decimal("-1234567890123456789012345678901234.5678"),
        (-12345678901234567890123456789012345678).to_bytes(16, "big", signed=True),
    ),
]


@pytest.mark.parametrize(("t", "value", "expected"), SPEC_EXAMPLES, ids=lambda x: str(x)[:20])
def test_spec_examples_round_trip(t: IcebergType, value: Any, expected: bytes) -> None:
    assert to_bytes(t, value) == expected
    assert from_bytes(t, expected) == value


def _pyiceberg_type(t: IcebergType) -> pt.PrimitiveType:
    if isinstance(t, DecimalType):
        return pt.DecimalType(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pt.FixedType(t.length)
    names: dict[type, Any] = {
        BooleanType: pt.BooleanType,
        IntegerType: pt.IntegerType,
        LongType: pt.LongType,
        FloatType: pt.FloatType,
        DoubleType: pt.DoubleType,
        DateType: pt.DateType,
        TimeType: pt.TimeType,
        TimestampType: pt.TimestampType,
        TimestamptzType: pt.TimestamptzType,
        StringType: pt.StringType,
        UUIDType: pt.UUIDType,
        BinaryType: pt.BinaryType,
    }
    return names[type(t)]()


@pytest.mark.parametrize(("t", "value", "expected"), SPEC_EXAMPLES, ids=lambda x: str(x)[:20])
def test_agrees_with_pyiceberg(t: IcebergType, value: Any, expected: bytes) -> None:
    other = uuid.UUID(bytes=value) if isinstance(t, UUIDType) else value
    assert py_conv.to_bytes(_pyiceberg_type(t), other) == to_bytes(t, value)


def test_nan_and_negative_zero_round_trip() -> None:
    for t in (FloatType(), DoubleType()):
        assert math.isnan(from_bytes(t, to_bytes(t, float("nan"))))
        back = from_bytes(t, to_bytes(t, -0.0))
        assert back == 0.0 and math.copysign(1.0, back) == -1.0


def test_bounds_written_before_promotion_are_read() -> None:
    assert from_bytes(LongType(), b"\x05\x00\x00\x00") == 5
    assert from_bytes(DoubleType(), to_bytes(FloatType(), 2.5)) == 2.5


def test_decimal_scale_is_the_types() -> None:
    assert to_bytes(DecimalType(9, 2), Decimal("1.5")) == to_bytes(
        DecimalType(9, 2), Decimal("1.50")
    )
    assert to_bytes(DecimalType(9, 2), 3) == (300).to_bytes(2, "big", signed=True)
    with pytest.raises(ValidationError, match="more than 2 digits"):
        to_bytes(DecimalType(9, 2), Decimal("1.234"))
    assert from_bytes(DecimalType(9, 2), b"\x64") == Decimal("1.00")
    assert str(from_bytes(DecimalType(9, 2), b"\x64")) == "1.00"


def test_accepts_uuid_objects() -> None:
    assert to_bytes(UUIDType(), uuid.UUID(UUID_TEXT)) == uuid.UUID(UUID_TEXT).bytes


@pytest.mark.parametrize(
    ("t", "data"),
    [
        (IntegerType(), b"\x01\x02"),
        (LongType(), b"\x01\x02\x03"),
        (BooleanType(), b""),
        (StringType(), b"\xff\xfe"),
        (UUIDType(), b"\x00" * 15),
        (FixedType(4), b"\x00" * 5),
    ],
)
def test_malformed_bytes_are_corruption(t: IcebergType, data: bytes) -> None:
    with pytest.raises(CorruptMetadataError, match=str(t).split("[")[0]):
        from_bytes(t, data)


def test_wrong_values_are_refused() -> None:
    with pytest.raises(ValidationError):
        to_bytes(IntegerType(), 2**31)
    with pytest.raises(ValidationError):
        to_bytes(FixedType(2), b"abc")


def test_decimal_required_bytes_matches_java() -> None:
    # TypeUtil.decimalRequiredBytes: precision 1..2 -> 1, 9 -> 4, 18 -> 8, 38 -> 16
    assert [decimal_required_bytes(p) for p in (1, 2, 3, 9, 10, 18, 19, 38)] == [
        1,
        1,
        2,
        4,
        5,
        8,
        9,
        16,
    ]


# --- truncation ------------------------------------------------------------------------


def test_string_truncation_counts_code_points() -> None:
    s = "😀😁😂abc"
    assert truncate_lower(StringType(), s, 2) == "😀😁"
    assert truncate_upper(StringType(), s, 2) == "😀😂"
    assert truncate_lower(StringType(), "ab", 5) == "ab"
    assert truncate_upper(StringType(), "ab", 5) == "ab"
    assert truncate_upper(StringType(), "abc", 3) == "abc"


def test_string_upper_carries_past_max_code_point() -> None:
    top = chr(0x10FFFF)
    assert truncate_upper(StringType(), "a" + top + "zz", 2) == "b"
    assert truncate_upper(StringType(), top * 3, 2) is None


def test_string_upper_skips_surrogates() -> None:
    assert truncate_upper(StringType(), "a\ud7ffz", 2) == "a\ue000"
    assert truncate_upper(StringType(), "a\ud7ffz", 2).encode("utf-8")


def test_upper_is_above_every_value_with_the_prefix() -> None:
    for value in ("abcdef", "zzz\U0010ffff", "héllo wörld"):
        upper = truncate_upper(StringType(), value, 3)
        assert upper is not None and upper.encode() > value.encode()
        assert truncate_lower(StringType(), value, 3).encode() <= value.encode()


def test_binary_truncation() -> None:
    assert truncate_lower(BinaryType(), b"\x01\x02\x03", 2) == b"\x01\x02"
    assert truncate_upper(BinaryType(), b"\x01\x02\x03", 2) == b"\x01\x03"
    assert truncate_upper(BinaryType(), b"\x01\xff\x03", 2) == b"\x02"
    assert truncate_upper(BinaryType(), b"\xff\xff\x03", 2) is None
    assert truncate_upper(BinaryType(), b"\xff\xff", 2) == b"\xff\xff"


def test_other_types_are_not_truncated() -> None:
    assert truncate_lower(LongType(), 123, 1) == 123
    assert truncate_upper(DecimalType(9, 2), Decimal("1.23"), 1) == Decimal("1.23")


def test_width_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="positive"):
        truncate_upper(StringType(), "abc", 0)
