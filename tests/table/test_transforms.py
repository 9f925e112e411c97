"""Partition transforms: spec vectors, every type, nulls, pre-1970 values, human strings.

Differential checks compare with pyiceberg's scalar (pure Python) transforms and
with pyiceberg-core's Rust kernels on random data.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Decimal
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from pyiceberg import transforms as pyt
from pyiceberg import types as pyty
from pyiceberg_core import transform as core

from stream_sink.exceptions import InvalidTransformError
from stream_sink.table.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Truncate,
    Void,
    Year,
    hash_array,
    parse_transform,
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
    ListType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from stream_sink.table.values import to_internal

EPOCH = dt.datetime(1970, 1, 1)
SPEC_UUID = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")


# --- spec Appendix B hash vectors ---------------------------------------------

SPEC_HASHES: list[tuple[pa.Array, IcebergType, int]] = [
    (pa.array([34], pa.int32()), IntegerType(), 2017239379),
    (pa.array([34], pa.int64()), LongType(), 2017239379),
    (pa.array([Decimal("14.20")], pa.decimal128(9, 2)), DecimalType(9, 2), -500754589),
    (pa.array([dt.date(2017, 11, 16)]), DateType(), -653330422),
    (pa.array([dt.time(22, 31, 8)], pa.time64("us")), TimeType(), -662762989),
    (
        pa.array([dt.datetime(2017, 11, 16, 22, 31, 8)], pa.timestamp("us")),
        TimestampType(),
        -2047944441,
    ),
    (
        pa.array([dt.datetime(2017, 11, 16, 22, 31, 8, 1)], pa.timestamp("us")),
        TimestampType(),
        -1207196810,
    ),
    (
        pa.array(
            [dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=dt.timezone.utc)],
            pa.timestamp("us", "UTC"),
        ),
        TimestamptzType(),
        -2047944441,
    ),
    (pa.array(["iceberg"]), StringType(), 1210000089),
    (pa.array([SPEC_UUID.bytes], pa.binary(16)), UUIDType(), 1488055340),
    (pa.array([bytes([0, 1, 2, 3])], pa.binary(4)), FixedType(4), -188683207),
    (pa.array([bytes([0, 1, 2, 3])]), BinaryType(), -188683207),
]


@pytest.mark.parametrize(("arr", "t", "expected"), SPEC_HASHES, ids=lambda x: str(x)[:20])
def test_spec_hash_vectors(arr: pa.Array, t: IcebergType, expected: int) -> None:
    assert int(hash_array(arr, t).view(np.int32)[0]) == expected


@pytest.mark.parametrize(("arr", "t", "expected"), SPEC_HASHES, ids=lambda x: str(x)[:20])
def test_bucket_follows_spec_hash(arr: pa.Array, t: IcebergType, expected: int) -> None:
    n = 2**31 - 1
    assert Bucket(n).apply(arr, t).to_pylist() == [(expected & 0x7FFFFFFF) % n]
    assert Bucket(16).apply(arr, t).to_pylist() == [(expected & 0x7FFFFFFF) % 16]


def test_bucket_of_uuid_extension_array() -> None:
    arr = pa.array([SPEC_UUID.bytes, None], pa.uuid())
    assert Bucket(2**31 - 1).apply(arr, UUIDType()).to_pylist() == [1488055340, None]


def test_spec_bucket_example_34_into_16_is_3() -> None:
    assert Bucket(16).apply(pa.array([34]), IntegerType()).to_pylist() == [3]


# --- bucket on every type, nulls kept -----------------------------------------

RNG = np.random.default_rng(20240102)


def _random_strings(n: int) -> list[str | None]:
    alphabet = list("abcxyz019 /é日本😀")
    out: list[str | None] = []
    for i in range(n):
        size = int(RNG.integers(0, 40)) if i % 50 else int(RNG.integers(100, 300))
        out.append("".join(RNG.choice(alphabet, size)) if i % 13 else None)
    return out


def _random_bytes(n: int, width: int | None = None) -> list[bytes | None]:
    out: list[bytes | None] = []
    for i in range(n):
        size = width if width is not None else int(RNG.integers(0, 70))
        out.append(RNG.bytes(size) if i % 11 else None)
    return out


def _random_decimals(n: int, precision: int, scale: int) -> list[Decimal | None]:
    digits = 10**precision - 1
    values = [int(v) for v in RNG.integers(-(2**62), 2**62, n)]
    values = [v % (2 * digits + 1) - digits for v in values] + [0, -1, 1, 127, 128, -128, -129]
    return [Decimal(v).scaleb(-scale) if i % 7 else None for i, v in enumerate(values)]


def _random_ints(n: int, lo: int, hi: int) -> list[int | None]:
    values = [int(v) for v in RNG.integers(lo, hi, n)] + [lo, hi - 1, 0, -1]
    return [v if i % 9 else None for i, v in enumerate(values)]


N = 2000


def _cases() -> list[tuple[str, pa.Array, IcebergType, Any]]:
    """(id, Arrow array, Iceberg type, pyiceberg type) over random data with nulls."""
    micros = _random_ints(N, -(10**17), 10**17)
    return [
        (
            "int",
            pa.array(_random_ints(N, -(2**31), 2**31), pa.int32()),
            IntegerType(),
            pyty.IntegerType(),
        ),
        (
            "long",
            pa.array(_random_ints(N, -(2**63), 2**63 - 1), pa.int64()),
            LongType(),
            pyty.LongType(),
        ),
        (
            "date",
            pa.array(_random_ints(N, -800_000, 3_000_000), pa.int32()).cast(pa.date32()),
            DateType(),
            pyty.DateType(),
        ),
        (
            "time",
            pa.array(_random_ints(N, 0, 86_400_000_000), pa.int64()).cast(pa.time64("us")),
            TimeType(),
            pyty.TimeType(),
        ),
        (
            "timestamp",
            pa.array(micros, pa.int64()).cast(pa.timestamp("us")),
            TimestampType(),
            pyty.TimestampType(),
        ),
        (
            "timestamptz",
            pa.array(micros, pa.int64()).cast(pa.timestamp("us", "UTC")),
            TimestamptzType(),
            pyty.TimestamptzType(),
        ),
        ("string", pa.array(_random_strings(N)), StringType(), pyty.StringType()),
        (
            "large_string",
            pa.array(_random_strings(N), pa.large_string()),
            StringType(),
            pyty.StringType(),
        ),
        ("binary", pa.array(_random_bytes(N)), BinaryType(), pyty.BinaryType()),
        ("fixed", pa.array(_random_bytes(N, 7), pa.binary(7)), FixedType(7), pyty.FixedType(7)),
        ("uuid", pa.array(_random_bytes(N, 16), pa.binary(16)), UUIDType(), pyty.UUIDType()),
        (
            "decimal9",
            pa.array(_random_decimals(N, 9, 2), pa.decimal128(9, 2)),
            DecimalType(9, 2),
            pyty.DecimalType(9, 2),
        ),
        (
            "decimal38",
            pa.array(_random_decimals(N, 38, 10), pa.decimal128(38, 10)),
            DecimalType(38, 10),
            pyty.DecimalType(38, 10),
        ),
    ]


CASES = _cases()
CASE_IDS = [c[0] for c in CASES]


def _pyiceberg_input(value: Any, t: IcebergType) -> Any:
    """pyiceberg's scalar transforms take uuid.UUID for uuid; internal values otherwise."""
    if value is not None and isinstance(t, UUIDType):
        return uuid.UUID(bytes=value)
    return value


def _pyiceberg(transform: Any, t: IcebergType, pytype: Any, values: list[Any]) -> list[Any]:
    fn = transform.transform(pytype)
    return [fn(_pyiceberg_input(v, t)) if v is not None else None for v in values]


@pytest.mark.parametrize(("name", "arr", "t", "pytype"), CASES, ids=CASE_IDS)
def test_bucket_matches_pyiceberg(name: str, arr: pa.Array, t: IcebergType, pytype: Any) -> None:
    for n in (1, 16, 1000, 2**31 - 1):
        got = Bucket(n).apply(arr, t)
        assert got.type == pa.int32()
        assert got.to_pylist() == _pyiceberg(pyt.BucketTransform(n), t, pytype, to_internal(arr, t))


@pytest.mark.parametrize(("name", "arr", "t", "pytype"), CASES, ids=CASE_IDS)
def test_numpy_bucket_matches_pyiceberg_core(
    name: str, arr: pa.Array, t: IcebergType, pytype: Any
) -> None:
    hashes = hash_array(arr, t)
    mine = pa.array(
        ((hashes & 0x7FFFFFFF) % 1000).astype(np.int32), mask=arr.is_null().to_numpy(False)
    )
    assert mine.to_pylist() == core.bucket(arr, 1000).to_pylist()


def test_bucket_of_strings_matches_mmh3_for_every_tail_length() -> None:
    values = ["x" * i for i in range(0, 70)] + ["é" * i for i in range(0, 30)]
    got = hash_array(pa.array(values), StringType()).view(np.int32).tolist()
    assert got == [mmh3.hash(v.encode()) for v in values]


def test_bucket_on_sliced_and_chunked_arrays() -> None:
    base = pa.array(["a", None, "iceberg", "zz", "iceberg"])
    sliced = base.slice(2, 3)
    expected = [(mmh3.hash(v) & 0x7FFFFFFF) % (2**31 - 1) for v in (b"iceberg", b"zz", b"iceberg")]
    assert Bucket(2**31 - 1).apply(sliced, StringType()).to_pylist() == expected
    longs = pa.array([1, 34, None, 34], pa.int64()).slice(1)
    assert Bucket(16).apply(longs, LongType()).to_pylist() == [3, None, 3]
    chunked = pa.chunked_array([pa.array([34], pa.int64()), pa.array([None, 34], pa.int64())])
    assert Bucket(16).apply(chunked, LongType()).to_pylist() == [3, None, 3]


def test_sliced_decimal_and_fixed_arrays() -> None:
    dec = pa.array(
        [Decimal("1.05"), None, Decimal("-10.65"), Decimal("14.20")], pa.decimal128(9, 2)
    )
    assert Truncate(50).apply(dec.slice(1), DecimalType(9, 2)).to_pylist() == [
        None,
        Decimal("-11.00"),
        Decimal("14.00"),
    ]
    assert Bucket(2**31 - 1).apply(dec.slice(3), DecimalType(9, 2)).to_pylist() == [
        -500754589 & 0x7FFFFFFF
    ]
    fixed = pa.array([b"xxxx", bytes([0, 1, 2, 3]), None], pa.binary(4)).slice(1)
    assert Bucket(2**31 - 1).apply(fixed, FixedType(4)).to_pylist() == [
        -188683207 & 0x7FFFFFFF,
        None,
    ]


def test_empty_and_all_null_inputs() -> None:
    assert Bucket(4).apply(pa.chunked_array([], pa.string()), StringType()).to_pylist() == []
    assert Bucket(4).apply(pa.nulls(2, pa.int64()), LongType()).to_pylist() == [None, None]
    assert Day().apply(pa.nulls(2, pa.timestamp("us")), TimestampType()).to_pylist() == [None, None]


def test_int_and_long_buckets_agree_so_promotion_keeps_partitions() -> None:
    values = _random_ints(500, -(2**31), 2**31)
    as_int = Bucket(97).apply(pa.array(values, pa.int32()), IntegerType())
    as_long = Bucket(97).apply(pa.array(values, pa.int64()), LongType())
    assert as_int.to_pylist() == as_long.to_pylist()


# --- truncate -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arr", "t", "pytype"),
    [
        c
        for c in CASES
        if isinstance(c[2], (IntegerType, LongType, StringType, BinaryType, DecimalType))
    ],
    ids=lambda x: str(x)[:12],
)
def test_truncate_matches_pyiceberg(name: str, arr: pa.Array, t: IcebergType, pytype: Any) -> None:
    for width in (1, 3, 10, 50, 1000):
        got = Truncate(width).apply(arr, t)
        assert got.type == arr.type
        expected = _pyiceberg(pyt.TruncateTransform(width), t, pytype, to_internal(arr, t))
        if isinstance(t, (IntegerType, LongType)):  # Java's arithmetic wraps at the minimum
            bits = 32 if isinstance(t, IntegerType) else 64
            half = 2 ** (bits - 1)
            expected = [None if v is None else (v + half) % 2**bits - half for v in expected]
        assert to_internal(got, t) == expected


def test_truncate_spec_examples() -> None:
    assert Truncate(10).apply(
        pa.array([1, -1, 0, 10, -10, None], pa.int32()), IntegerType()
    ).to_pylist() == [0, -10, 0, 10, -10, None]
    assert Truncate(10).apply(pa.array([1, -1, 2**62 + 5], pa.int64()), LongType()).to_pylist() == [
        0,
        -10,
        2**62 + 5 - 9,
    ]
    dec = pa.array(
        [Decimal("10.65"), Decimal("-10.65"), Decimal("0.00"), None], pa.decimal128(9, 2)
    )
    assert Truncate(50).apply(dec, DecimalType(9, 2)).to_pylist() == [
        Decimal("10.50"),
        Decimal("-11.00"),
        Decimal("0.00"),
        None,
    ]
    strings = pa.array(["iceberg", "ic", "", None, "日本語テキスト", "😀😀😀"])
    assert Truncate(3).apply(strings, StringType()).to_pylist() == [
        "ice",
        "ic",
        "",
        None,
        "日本語",
        "😀😀😀",
    ]
    binary = pa.array([b"\x01\x02\x03\x04\x05", b"\x01", None])
    assert Truncate(3).apply(binary, BinaryType()).to_pylist() == [b"\x01\x02\x03", b"\x01", None]


def test_truncate_decimal_with_large_negative_unscaled_values() -> None:
    values = [Decimal("-99999999999999999999999999999999999999"), Decimal("-1"), Decimal(2**100)]
    arr = pa.array(values, pa.decimal128(38, 0))
    got = Truncate(7).apply(arr, DecimalType(38, 0)).to_pylist()
    assert got == [Decimal(int(v) - int(v) % 7) for v in values]


# --- year / month / day / hour --------------------------------------------------


def _ordinals(micros: int | None) -> tuple[Any, ...]:
    if micros is None:
        return (None, None, None, None)
    ts = EPOCH + dt.timedelta(microseconds=micros)
    return (
        ts.year - 1970,
        (ts.year - 1970) * 12 + ts.month - 1,
        (ts - EPOCH).days,
        int((ts - EPOCH) // dt.timedelta(hours=1)),
    )


def test_time_transforms_on_timestamps_including_before_1970() -> None:
    micros = [
        0,
        -1,
        1,
        -86_400_000_000,
        -86_400_000_001,
        1_704_164_400_000_000,
        -62_135_596_800_000_000,
        253_402_300_799_999_999,
        None,
    ]
    for unit_type in (TimestampType(), TimestamptzType()):
        tz = "UTC" if isinstance(unit_type, TimestamptzType) else None
        arr = pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz))
        expected = list(zip(*(_ordinals(m) for m in micros), strict=True))
        for transform, want in zip((Year(), Month(), Day(), Hour()), expected, strict=True):
            got = transform.apply(arr, unit_type)
            assert got.type == pa.int32(), transform
            assert got.to_pylist() == list(want), transform


def test_time_transforms_on_dates_including_before_1970() -> None:
    days = [0, -1, 31, -365, -719162, 2_932_896, 19724, None]
    arr = pa.array(days, pa.int32()).cast(pa.date32())
    dates = [None if d is None else dt.date(1970, 1, 1) + dt.timedelta(days=d) for d in days]
    assert Year().apply(arr, DateType()).to_pylist() == [
        None if d is None else d.year - 1970 for d in dates
    ]
    assert Month().apply(arr, DateType()).to_pylist() == [
        None if d is None else (d.year - 1970) * 12 + d.month - 1 for d in dates
    ]
    assert Day().apply(arr, DateType()).to_pylist() == days


@pytest.mark.parametrize("transform", [Year(), Month(), Day(), Hour()], ids=str)
def test_time_transforms_match_pyiceberg(transform: Any) -> None:
    micros = _random_ints(N, -(6 * 10**16), 2 * 10**17)  # years 1 to 8000
    arr = pa.array(micros, pa.int64()).cast(pa.timestamp("us"))
    pytransform = parse_pyiceberg(str(transform))
    assert transform.apply(arr, TimestampType()).to_pylist() == _pyiceberg(
        pytransform, TimestampType(), pyty.TimestampType(), micros
    )
    if not isinstance(transform, Hour):
        days = _random_ints(N, -700_000, 2_900_000)
        darr = pa.array(days, pa.int32()).cast(pa.date32())
        assert transform.apply(darr, DateType()).to_pylist() == _pyiceberg(
            pytransform, DateType(), pyty.DateType(), days
        )


def parse_pyiceberg(name: str) -> Any:
    return pyt.parse_transform(name)


def test_nanosecond_timestamps_floor_to_micros() -> None:
    arr = pa.array([-1, 1, None], pa.timestamp("ns"))
    assert Day().apply(arr, TimestampType()).to_pylist() == [-1, 0, None]
    assert Hour().apply(arr, TimestampType()).to_pylist() == [-1, 0, None]


# --- identity / void ----------------------------------------------------------


def test_identity_returns_input_and_void_returns_nulls() -> None:
    arr = pa.array([1.5, None, -0.0], pa.float32())
    assert Identity().apply(arr, FloatType()).equals(arr)
    void = Void().apply(arr, FloatType())
    assert void.type == pa.float32() and void.to_pylist() == [None, None, None]
    ext = pa.array([SPEC_UUID.bytes], pa.uuid())
    assert Identity().apply(ext, UUIDType()).type == pa.uuid()


# --- types, names and parsing ---------------------------------------------------


@pytest.mark.parametrize(
    ("transform", "source", "ok"),
    [
        (Bucket(4), BooleanType(), False),
        (Bucket(4), FloatType(), False),
        (Bucket(4), DoubleType(), False),
        (Truncate(4), DateType(), False),
        (Truncate(4), UUIDType(), False),
        (Truncate(4), FixedType(3), False),
        (Year(), TimeType(), False),
        (Month(), StringType(), False),
        (Day(), LongType(), False),
        (Hour(), DateType(), False),
        (Identity(), ListType(1, IntegerType()), False),
        (Void(), ListType(1, IntegerType()), True),
        (Identity(), DoubleType(), True),
        (Bucket(4), DecimalType(38, 0), True),
        (Hour(), TimestamptzType(), True),
    ],
    ids=str,
)
def test_can_transform(transform: Any, source: IcebergType, ok: bool) -> None:
    assert transform.can_transform(source) is ok
    if not ok:
        with pytest.raises(
            InvalidTransformError,
            match=re.escape(f"{transform} cannot be applied to type {source}"),
        ):
            transform.apply(pa.array([], pa.int32()), source)
        with pytest.raises(InvalidTransformError):
            transform.result_type(source)


def test_result_types() -> None:
    assert Bucket(3).result_type(StringType()) == IntegerType()
    assert Year().result_type(TimestampType()) == IntegerType()
    assert Month().result_type(DateType()) == IntegerType()
    assert Day().result_type(TimestamptzType()) == DateType()
    assert Hour().result_type(TimestampType()) == IntegerType()
    assert Identity().result_type(DecimalType(9, 2)) == DecimalType(9, 2)
    assert Truncate(2).result_type(StringType()) == StringType()
    assert Void().result_type(LongType()) == LongType()


@pytest.mark.parametrize(
    "text", ["identity", "bucket[16]", "truncate[4]", "year", "month", "day", "hour", "void"]
)
def test_parse_round_trip(text: str) -> None:
    t = parse_transform(text)
    assert str(t) == text
    assert parse_transform(str(t)) == t
    assert hash(parse_transform(text)) == hash(t)


@pytest.mark.parametrize(
    "text",
    ["bucket", "bucket[]", "bucket[0]", "truncate[-1]", "bucket[2147483648]", "days", "", "zorder"],
)
def test_parse_rejects_unknown(text: str) -> None:
    with pytest.raises(InvalidTransformError):
        parse_transform(text)


def test_bucket_and_truncate_arguments_must_be_32_bit_ints() -> None:
    for bad in (0, -1, 2**31, True, 1.5):
        with pytest.raises(InvalidTransformError):
            Bucket(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidTransformError):
            Truncate(bad)  # type: ignore[arg-type]


def test_transforms_are_immutable_values() -> None:
    assert Bucket(16) == Bucket(16) and Bucket(16) != Bucket(8) and Truncate(4) != Bucket(4)
    assert len({Bucket(16), Bucket(16), Day(), Day()}) == 2
    with pytest.raises(AttributeError):
        Bucket(16).num_buckets = 3  # type: ignore[misc]


def test_order_satisfaction() -> None:
    assert Hour().satisfies_order_of(Day()) and Day().satisfies_order_of(Month())
    assert not Year().satisfies_order_of(Day())
    assert Identity().satisfies_order_of(Day()) and not Identity().satisfies_order_of(Bucket(2))
    assert Truncate(10).satisfies_order_of(Truncate(5)) and not Truncate(5).satisfies_order_of(
        Truncate(10)
    )
    assert not Bucket(4).preserves_order and Day().preserves_order


# --- human strings (Java's toHumanString) -----------------------------------------


@pytest.mark.parametrize(
    ("transform", "source", "value", "expected"),
    [
        (Day(), TimestampType(), 19724, "2024-01-02"),
        (Day(), DateType(), -1, "1969-12-31"),
        (Hour(), TimestampType(), 19724 * 24 + 13, "2024-01-02-13"),
        (Hour(), TimestamptzType(), -1, "1969-12-31-23"),
        (Month(), DateType(), 648, "2024-01"),
        (Month(), DateType(), -1, "1969-12"),
        (Year(), TimestampType(), 54, "2024"),
        (Year(), TimestampType(), -1, "1969"),
        (Year(), DateType(), -1971, "-001"),
        (Bucket(16), StringType(), 3, "3"),
        (Void(), LongType(), None, "null"),
        (Day(), DateType(), None, "null"),
        (Identity(), DateType(), 17486, "2017-11-16"),
        (Identity(), TimeType(), 81068000000, "22:31:08"),
        (Identity(), TimeType(), 81060000000, "22:31"),
        (Identity(), TimeType(), 81068500000, "22:31:08.500"),
        (Identity(), TimeType(), 81068000001, "22:31:08.000001"),
        (Identity(), TimestampType(), 1510871468000000, "2017-11-16T22:31:08"),
        (Identity(), TimestampType(), 1510871468100000, "2017-11-16T22:31:08.1"),
        (Identity(), TimestampType(), -1, "1969-12-31T23:59:59.999999"),
        (Identity(), TimestamptzType(), 1510871468000001, "2017-11-16T22:31:08.000001+00:00"),
        (Identity(), TimestampType(), 253402300800000000, "+10000-01-01T00:00:00"),
        (Identity(), DecimalType(9, 2), Decimal("14.20"), "14.20"),
        (Identity(), DecimalType(9, 2), Decimal("-0.05"), "-0.05"),
        (Identity(), DecimalType(20, 10), Decimal("1E-10"), "1E-10"),
        (Identity(), BinaryType(), b"\x00\x01\x02\x03", "AAECAw=="),
        (Identity(), FixedType(2), b"\xff\xfe", "//4="),
        (Identity(), UUIDType(), SPEC_UUID.bytes, str(SPEC_UUID)),
        (Identity(), BooleanType(), True, "true"),
        (Identity(), LongType(), -34, "-34"),
        (Identity(), DoubleType(), 1.0, "1.0"),
        (Identity(), DoubleType(), 1e10, "1.0E10"),
        (Identity(), DoubleType(), 0.001, "0.001"),
        (Identity(), DoubleType(), 1.234e-5, "1.234E-5"),
        (Identity(), DoubleType(), 1234567.5, "1234567.5"),
        (Identity(), DoubleType(), float("nan"), "NaN"),
        (Identity(), DoubleType(), -0.0, "-0.0"),
        (Identity(), FloatType(), float(np.float32(1.1)), "1.1"),
        (Identity(), StringType(), "a b/c", "a b/c"),
        (Truncate(2), StringType(), "ic", "ic"),
        (Truncate(2), BinaryType(), b"\x01\x02", "AQI="),
    ],
    ids=lambda x: str(x)[:24],
)
def test_human_strings(transform: Any, source: IcebergType, value: Any, expected: str) -> None:
    assert transform.to_human_string(source, value) == expected


@pytest.mark.parametrize("days", [-719_162, -1, 0, 59, 60, 365, 11_016, 19_724, 2_932_896])
def test_human_day_agrees_with_pyiceberg(days: int) -> None:
    expected = pyt.DayTransform().to_human_string(pyty.DateType(), days)
    assert Day().to_human_string(DateType(), days) == expected
