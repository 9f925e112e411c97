"""The table shapes and rows the interop tests write with stream_sink.

One wide schema holds every primitive type Spark can read (all but ``time``),
nested structs, lists, maps and a list of structs. Rows are deterministic and
cover the edges readers get wrong: nulls in every optional column (also nested),
unicode, negative numbers and integer extremes, NaN and infinities, dates and
timestamps before 1970 (down to one microsecond before the epoch), decimals with
negative unscaled values, empty and non-UTF-8 binary, and timestamps with and
without zone.

``SHAPES`` names one partition spec per table: every transform on every source
type the issue asks for. Java allows only one time transform per column in a
spec, so year/month/day/hour are spread over four tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa

from stream_sink.table.arrow import schema_to_arrow
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

ROWS = 32

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "flag", BooleanType()),
    NestedField(3, "i", IntegerType()),
    NestedField(4, "l", LongType()),
    NestedField(5, "f", FloatType()),
    NestedField(6, "d", DoubleType()),
    NestedField(7, "dec", DecimalType(9, 2)),
    NestedField(8, "dec38", DecimalType(38, 10)),
    NestedField(9, "dt", DateType()),
    NestedField(10, "ts", TimestampType()),
    NestedField(11, "tstz", TimestamptzType()),
    NestedField(12, "s", StringType()),
    NestedField(13, "bin", BinaryType()),
    NestedField(14, "fx", FixedType(5)),
    NestedField(15, "u", UUIDType()),
    NestedField(
        16,
        "st",
        StructType(
            NestedField(17, "a", IntegerType()),
            NestedField(18, "b", StringType()),
            NestedField(19, "inner", StructType(NestedField(20, "x", DoubleType()))),
        ),
    ),
    NestedField(21, "li", ListType(22, LongType())),
    NestedField(23, "mp", MapType(24, StringType(), 25, IntegerType())),
    NestedField(
        26,
        "los",
        ListType(
            27,
            StructType(
                NestedField(28, "k", StringType(), required=True),
                NestedField(29, "v", DecimalType(9, 2)),
            ),
        ),
    ),
)

# Spark (and so Java Iceberg through it) refuses any table with a time column, so
# time gets its own table, read by every reader but Java.
TIME_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "t", TimeType()),
)


@dataclass(frozen=True)
class Shape:
    name: str
    spec: tuple[tuple[Any, ...], ...]  # over SCHEMA
    java: bool = True  # whether Java Iceberg can read the table at all


SHAPES: tuple[Shape, ...] = (
    Shape("unpartitioned", ()),
    Shape(
        "identity",
        tuple(
            ("identity", c) for c in ("flag", "i", "l", "dec", "dt", "ts", "tstz", "s", "bin", "u")
        ),
    ),
    # Java Iceberg 1.10.2 misdecodes a manifest whose partition tuple holds an identity
    # value of a fixed column (it fails the same on tables pyiceberg writes), so this
    # shape is read by every reader but Java
    Shape("identity_fixed", (("identity", "fx"),), java=False),
    Shape(
        "bucket",
        (
            ("bucket", "i", 16),
            ("bucket", "l", 16),
            ("bucket", "s", 8),
            ("bucket", "dt", 5),
            ("bucket", "dec", 7),
            ("bucket", "bin", 3),
            ("bucket", "fx", 4),
            ("bucket", "u", 6),
        ),
    ),
    Shape(
        "truncate",
        (
            ("truncate", "i", 10),
            ("truncate", "l", 100),
            ("truncate", "s", 2),
            ("truncate", "dec", 50),
            ("truncate", "bin", 2),
        ),
    ),
    Shape("time_a", (("year", "dt"), ("month", "ts"), ("day", "tstz"))),
    Shape("time_b", (("month", "dt"), ("day", "ts"), ("hour", "tstz"))),
    Shape("time_c", (("day", "dt"), ("hour", "ts"), ("year", "tstz"))),
    Shape("time_d", (("year", "ts"), ("month", "tstz"))),
    Shape("void", (("void", "i"), ("void", "s"))),
    Shape(
        "multi",
        (
            ("identity", "flag"),
            ("bucket", "l", 4),
            ("truncate", "s", 1),
            ("day", "ts"),
            ("void", "dec"),
        ),
    ),
)

_STRINGS = [
    "",
    "a",
    "ascii",
    "név",
    "名前",
    "😀 emoji",
    "straße",
    "e\u0301",
    "Ωmega",
    "tab\tnew\nline",
]
_EPOCH = datetime(1970, 1, 1)
_INT_EXTREMES = (-(2**31), 2**31 - 1)
_LONG_EXTREMES = (-(2**63), 2**63 - 1)
_FLOAT_EDGES = (float("nan"), float("inf"), float("-inf"), -0.0)


def _null(i: int) -> bool:
    """Rows whose every optional column is null (nulls in each partition column too)."""
    return i % 11 == 5


# column -> value of row i, with k = i - ROWS // 2 (negative for the first half)
_VALUES: dict[str, Callable[[int, int], Any]] = {
    "flag": lambda i, k: i % 3 == 0,
    "i": lambda i, k: _INT_EXTREMES[i % 2] if i % 9 == 0 else k * 7 - 1,
    "l": lambda i, k: _LONG_EXTREMES[i % 2] if i % 10 == 1 else k * 1_000_003 - 17,
    "f": lambda i, k: _FLOAT_EDGES[i % 4] if i % 8 == 7 else k / 4,
    "d": lambda i, k: float("nan") if i % 13 == 4 else k * 1.5e-3 - 1e300 * (i == 3),
    "dec": lambda i, k: Decimal(k * 12_345 + i) / 100,
    "dec38": lambda i, k: Decimal(
        f"{k}1234567890123456789.0123456789" if i % 2 else f"{k}.{i * 7_654_321:010d}"
    ),
    "dt": lambda i, k: date(1969, 12, 31) + timedelta(days=k * 97 - (i == 1) * 80_000),
    "ts": lambda i, k: _EPOCH - timedelta(microseconds=1) + timedelta(minutes=k * 4_001),
    "tstz": lambda i, k: (
        datetime(1969, 12, 31, 23, tzinfo=timezone.utc)
        + timedelta(seconds=k * 86_399, microseconds=i)
    ),
    "s": lambda i, k: f"{_STRINGS[i % len(_STRINGS)]}{k}",
    "bin": lambda i, k: [b"", b"\x00", b"\xff\xfe\x00x", bytes(range(i % 20))][i % 4],
    "fx": lambda i, k: bytes([(i * 37 + j) % 256 for j in range(5)]),
    "u": lambda i, k: uuid.UUID(int=(i * 0x9E3779B97F4A7C15_0123456789ABCDEF) % 2**128).bytes,
    "st": lambda i, k: {
        "a": k,
        "b": None if i % 4 == 1 else f"b{k}",
        "inner": None if i % 3 == 2 else {"x": None if i % 5 == 0 else k / 8},
    },
    "li": lambda i, k: [] if i % 6 == 0 else [k, None, -(2**63)][: i % 3 + 1],
    "mp": lambda i, k: [] if i % 7 == 0 else [("ключ", k), ("k2", None), (f"n{i}", i)][: i % 3 + 1],
    "los": lambda i, k: [{"k": "x", "v": Decimal(k) / 100}, {"k": "ü", "v": None}][: i % 3],
}


def rows(start: int = 0, stop: int = ROWS) -> pa.Table:
    """Rows ``start``..``stop - 1`` of the wide schema, in its Arrow form."""
    arrow = schema_to_arrow(SCHEMA)
    columns: dict[str, list[Any]] = {"id": list(range(start, stop))}
    for f in SCHEMA.fields[1:]:
        value = _VALUES[f.name]
        columns[f.name] = [
            None if _null(i) else value(i, i - ROWS // 2) for i in range(start, stop)
        ]
    return pa.table(columns, schema=arrow)


def time_rows() -> pa.Table:
    values = [None, time(0), time(23, 59, 59, 999_999), time(12, 30, 1, 5)]
    return pa.table(
        {"id": list(range(len(values))), "t": values}, schema=schema_to_arrow(TIME_SCHEMA)
    )
