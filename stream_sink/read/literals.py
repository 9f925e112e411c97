"""Filter literals: user values to Iceberg internal values, and internal values to Arrow.

Internal forms are those of :mod:`stream_sink.table.values` (dates as int days,
times and timestamps as int microseconds, nanosecond timestamps as int nanoseconds,
decimals as ``Decimal``, uuid as 16 bytes), so literals compare directly with
partition values and decoded bounds.

Accepted user values: Python values of the matching kind, ISO-8601 strings for
date/time/timestamp (a naive string for ``timestamptz`` is taken as UTC), decimal
strings, uuid strings or ``uuid.UUID``.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from stream_sink.table.arrow import type_to_arrow
from stream_sink.table.nanos import datetime_nanos, parse_nanos
from stream_sink.table.types import (
    NANO_TIMESTAMPS,
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
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_TZ = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


class LiteralError(ValueError):
    """A value cannot be read as the column's type (the binder adds the column)."""


def to_internal(t: IcebergType, value: Any) -> Any:
    """``value`` as the internal value of type ``t``; LiteralError when it cannot be."""
    try:
        return _convert(t, value)
    except (ValueError, TypeError, InvalidOperation, OverflowError) as e:
        if isinstance(e, LiteralError):
            raise
        raise LiteralError(f"{value!r} is not a {t} value: {e}") from e


def _convert(t: IcebergType, v: Any) -> Any:
    if isinstance(t, BooleanType):
        return _boolean(v)
    if isinstance(t, (IntegerType, LongType)):
        return _integer(v)
    if isinstance(t, (FloatType, DoubleType)):
        if isinstance(v, bool) or not isinstance(v, (int, float, str, Decimal)):
            raise LiteralError(f"{v!r} is not a number")
        return float(v)
    if isinstance(t, DecimalType):
        return _decimal(v, t)
    if isinstance(t, DateType):
        return _date(v)
    if isinstance(t, TimeType):
        return _time(v)
    if isinstance(t, (TimestampType, TimestamptzType)):
        return _timestamp(v, isinstance(t, TimestamptzType))
    if isinstance(t, NANO_TIMESTAMPS):
        return _timestamp_nanos(v, isinstance(t, TimestamptzNanoType))
    if isinstance(t, StringType):
        if not isinstance(v, str):
            raise LiteralError(f"{v!r} is not a string")
        return v
    if isinstance(t, UUIDType):
        return _uuid(v)
    if isinstance(t, (BinaryType, FixedType)):
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise LiteralError(f"{v!r} is not bytes")
        return bytes(v)
    raise LiteralError(f"columns of type {t} cannot be filtered")


def _boolean(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise LiteralError(f"{v!r} is not a boolean")


def _integer(v: Any) -> int:
    if isinstance(v, bool):
        raise LiteralError(f"{v!r} is not an integer")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        return int(v.strip())
    raise LiteralError(f"{v!r} is not an integer")


def _decimal(v: Any, t: DecimalType) -> Decimal:
    if isinstance(v, bool) or not isinstance(v, (int, float, str, Decimal)):
        raise LiteralError(f"{v!r} is not a decimal")
    d = Decimal(str(v)) if not isinstance(v, Decimal) else v
    if not d.is_finite():
        raise LiteralError(f"{v!r} is not a finite decimal")
    return d


def _date(v: Any) -> int:
    if isinstance(v, dt.datetime):
        raise LiteralError(f"{v!r} is a timestamp, not a date")
    if isinstance(v, dt.date):
        return (v - _EPOCH_DATE).days
    if isinstance(v, str):
        return (dt.date.fromisoformat(v.strip()) - _EPOCH_DATE).days
    return _integer(v)


def _time(v: Any) -> int:
    if isinstance(v, str):
        v = dt.time.fromisoformat(v.strip())
    if isinstance(v, dt.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return _integer(v)


def _timestamp(v: Any, with_zone: bool) -> int:
    if isinstance(v, str):
        s = v.strip().replace(" ", "T", 1)
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        v = dt.datetime.fromisoformat(s)
    elif isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        v = dt.datetime(v.year, v.month, v.day)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            if not with_zone:
                raise LiteralError(f"{v!r} has a time zone; the column is a timestamp without one")
            return _micros(v - _EPOCH_TZ)
        return _micros(v - _EPOCH)
    return _integer(v)


def _timestamp_nanos(v: Any, with_zone: bool) -> int:
    """Nanoseconds: ISO text with up to nine fraction digits, a datetime, or an int."""
    if isinstance(v, str):
        return parse_nanos(v, with_zone, naive_is_utc=True)
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime):
        v = dt.datetime(v.year, v.month, v.day)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None and not with_zone:
            raise LiteralError(f"{v!r} has a time zone; the column is a timestamp without one")
        return datetime_nanos(v)
    return _integer(v)


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _uuid(v: Any) -> bytes:
    if isinstance(v, uuid.UUID):
        return v.bytes
    if isinstance(v, str):
        return uuid.UUID(v).bytes
    if isinstance(v, (bytes, bytearray)) and len(v) == 16:
        return bytes(v)
    raise LiteralError(f"{v!r} is not a uuid")


def is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


# --- internal -> Arrow -----------------------------------------------------------------


def to_arrow_array(t: IcebergType, values: list[Any]) -> pa.Array:
    """An Arrow array of type ``type_to_arrow(t)`` holding internal ``values``."""
    target = type_to_arrow(t)
    if isinstance(t, DateType):
        return pa.array(values, pa.int32()).cast(target)
    if isinstance(t, (TimeType, TimestampType, TimestamptzType, *NANO_TIMESTAMPS)):
        return pa.array(values, pa.int64()).cast(target)
    if isinstance(t, DecimalType):
        return _decimal_array(values, target)
    return pa.array(values, target)


def _decimal_array(values: list[Any], target: pa.DataType) -> pa.Array:
    """Decimals at the column's type; literals that need more digits than the type
    has keep their own precision (they can still be compared)."""
    try:
        return pa.array(values, target)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(values, pa.decimal128(38, max(-d.as_tuple().exponent for d in values)))
