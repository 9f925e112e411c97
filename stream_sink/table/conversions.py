"""The spec's single-value binary serialization (Appendix D) and bound truncation.

Values are in their internal form: date -> int days, time/timestamp/timestamptz ->
int microseconds, timestamp_ns/timestamptz_ns -> int nanoseconds (an 8-byte long),
decimal -> ``decimal.Decimal``, string -> ``str``, binary/fixed/uuid -> ``bytes``,
numbers and booleans as Python numbers.

Invariants:
- ``from_bytes(t, to_bytes(t, v)) == v`` for every type and value (NaN included).
- Decimals are written as the minimal big-endian two's-complement unscaled value
  at the type's scale; a value that cannot be represented at that scale is refused.
- ``from_bytes`` also reads bounds written before a type promotion (4-byte int as
  long, 4-byte float as double), as Java does.
- ``truncate_lower(t, v, w) <= every value with that prefix`` and
  ``truncate_upper(t, v, w) >= every value with that prefix``; ``truncate_upper``
  returns None when no such bound of at most ``w`` units exists.
"""

from __future__ import annotations

import struct
import uuid
from decimal import Decimal
from typing import Any

from stream_sink.exceptions import CorruptMetadataError, ValidationError
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
    TimestamptzType,
    TimeType,
    UUIDType,
)

_INT = struct.Struct("<i")
_LONG = struct.Struct("<q")
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


# --- serialization -------------------------------------------------------------


def to_bytes(t: IcebergType, value: Any) -> bytes:
    """The single-value binary form of ``value`` (internal representation) of type ``t``."""
    try:
        return _to_bytes(t, value)
    except (struct.error, TypeError, AttributeError, UnicodeEncodeError) as e:
        raise ValidationError(f"cannot serialize {value!r} as {t}: {e}") from e


def _to_bytes(t: IcebergType, value: Any) -> bytes:
    if isinstance(t, BooleanType):
        return b"\x01" if value else b"\x00"
    if isinstance(t, (IntegerType, DateType)):
        return _INT.pack(value)
    if isinstance(t, (LongType, TimeType, TimestampType, TimestamptzType, *NANO_TIMESTAMPS)):
        return _LONG.pack(value)
    if isinstance(t, FloatType):
        return _FLOAT.pack(value)
    if isinstance(t, DoubleType):
        return _DOUBLE.pack(value)
    if isinstance(t, StringType):
        return str(value).encode("utf-8")
    if isinstance(t, UUIDType):
        raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
        if len(raw) != 16:
            raise ValidationError(f"a uuid is 16 bytes, got {len(raw)}")
        return raw
    if isinstance(t, FixedType):
        raw = bytes(value)
        if len(raw) != t.length:
            raise ValidationError(f"{t} value has {len(raw)} bytes")
        return raw
    if isinstance(t, BinaryType):
        return bytes(value)
    if isinstance(t, DecimalType):
        return unscaled_to_bytes(decimal_to_unscaled(value, t.scale))
    raise ValidationError(f"type {t} has no single-value serialization")


def from_bytes(t: IcebergType, data: bytes) -> Any:
    """Inverse of :func:`to_bytes`; malformed bytes raise CorruptMetadataError."""
    try:
        return _from_bytes(t, bytes(data))
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        raise CorruptMetadataError(f"cannot read a {t} value from {bytes(data)!r}: {e}") from e


def _from_bytes(t: IcebergType, data: bytes) -> Any:
    if isinstance(t, BooleanType):
        if len(data) != 1:
            raise ValueError("a boolean is 1 byte")
        return data != b"\x00"
    if isinstance(t, (IntegerType, DateType)):
        return _INT.unpack(data)[0]
    if isinstance(t, (LongType, TimeType, TimestampType, TimestamptzType, *NANO_TIMESTAMPS)):
        return _INT.unpack(data)[0] if len(data) == 4 else _LONG.unpack(data)[0]
    if isinstance(t, FloatType):
        return _FLOAT.unpack(data)[0]
    if isinstance(t, DoubleType):
        return _FLOAT.unpack(data)[0] if len(data) == 4 else _DOUBLE.unpack(data)[0]
    if isinstance(t, StringType):
        return data.decode("utf-8")
    if isinstance(t, UUIDType):
        if len(data) != 16:
            raise ValueError("a uuid is 16 bytes")
        return data
    if isinstance(t, FixedType):
        if len(data) != t.length:
            raise ValueError(f"expected {t.length} bytes")
        return data
    if isinstance(t, BinaryType):
        return data
    if isinstance(t, DecimalType):
        return unscaled_to_decimal(int.from_bytes(data, "big", signed=True), t.scale)
    raise ValidationError(f"type {t} has no single-value serialization")


# --- decimals --------------------------------------------------------------------


def decimal_to_unscaled(value: Decimal | int, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale``, exactly (no context rounding).

    Values needing more digits after the point than ``scale`` are refused.
    """
    d = Decimal(value)
    if not d.is_finite():
        raise ValidationError(f"{value!r} is not a finite decimal")
    sign, digits, exponent = d.as_tuple()
    magnitude = int("".join(map(str, digits)) or "0")
    shift = int(exponent) + scale
    if shift >= 0:
        magnitude *= 10**shift
    else:
        magnitude, rest = divmod(magnitude, 10**-shift)
        if rest:
            raise ValidationError(f"{value!r} has more than {scale} digits after the point")
    return -magnitude if sign else magnitude


def unscaled_to_decimal(unscaled: int, scale: int) -> Decimal:
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return Decimal((1 if unscaled < 0 else 0, digits, -scale))


def unscaled_to_bytes(unscaled: int, length: int | None = None) -> bytes:
    """Big-endian two's complement: minimal length (as Java's BigInteger) or ``length``."""
    if length is None:
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def decimal_required_bytes(precision: int) -> int:
    """Bytes of the smallest fixed that holds every unscaled value of ``precision`` digits."""
    length = 1
    while 2 ** (8 * length - 1) < 10**precision:
        length += 1
    return length


# --- truncation ------------------------------------------------------------------


def truncate_lower(t: IcebergType, value: Any, width: int) -> Any:
    """A lower bound of ``value`` at most ``width`` code points (strings) or bytes long."""
    _check_width(width)
    if isinstance(t, StringType):
        return value[:width]
    if isinstance(t, BinaryType):
        return bytes(value[:width])
    return value


def truncate_upper(t: IcebergType, value: Any, width: int) -> Any:
    """An upper bound of ``value`` at most ``width`` units long, or None if there is none.

    Strings: keep ``width`` code points and increment the last one that can be
    incremented (skipping surrogates), dropping those after it. Binary: the same with
    bytes, where 0xFF cannot be incremented.
    """
    _check_width(width)
    if isinstance(t, StringType):
        return _string_upper(value, width)
    if isinstance(t, BinaryType):
        return _binary_upper(bytes(value), width)
    return value


def _check_width(width: int) -> None:
    if width <= 0:
        raise ValidationError(f"truncation width must be positive, got {width}")


def _string_upper(value: str, width: int) -> str | None:
    if len(value) <= width:
        return value
    points = [ord(c) for c in value[:width]]
    for i in range(len(points) - 1, -1, -1):
        nxt = points[i] + 1
        if nxt in _SURROGATES:
            nxt = _SURROGATES.stop
        if nxt <= _MAX_CODE_POINT:
            return "".join(map(chr, points[:i])) + chr(nxt)
    return None


def _binary_upper(value: bytes, width: int) -> bytes | None:
    if len(value) <= width:
        return value
    head = value[:width]
    for i in range(len(head) - 1, -1, -1):
        if head[i] != 0xFF:
            return head[:i] + bytes([head[i] + 1])
    return None
