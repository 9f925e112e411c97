"""Arrow arrays to Iceberg's internal Python values (the form manifests store).

Internal forms, per Iceberg type:

=========================  ==============================================
boolean, int, long         bool, int
float, double              float
date                       int, days since 1970-01-01
time                       int, microseconds since midnight
timestamp, timestamptz     int, microseconds since 1970-01-01 00:00 UTC
timestamp(tz)_ns           int, nanoseconds since 1970-01-01 00:00 UTC
unknown                    None (always null)
decimal(P, S)              decimal.Decimal with exponent -S
string                     str
binary, fixed[L]           bytes
uuid                       bytes, 16, big-endian
=========================  ==============================================

Null is None. Conversion is vectorized (Arrow casts), then one ``to_pylist``.
The input may be a transform result: ``day`` gives int32 days for a date, which
is already the internal form.
"""

from __future__ import annotations

from decimal import Context, Decimal

import numpy as np
import pyarrow as pa

from stream_sink.exceptions import SchemaMismatchError
from stream_sink.table.types import (
    NANO_TIMESTAMPS,
    DateType,
    DecimalType,
    IcebergType,
    PrimitiveType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UnknownType,
)

_TO_MICROS = {"s": 1_000_000, "ms": 1000, "us": 1}


def to_internal(arr: pa.Array | pa.ChunkedArray, t: IcebergType) -> list:
    """The internal value of every element of ``arr`` read as Iceberg type ``t``."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    if not isinstance(t, PrimitiveType):
        raise SchemaMismatchError(f"no internal value form for nested type {t}")
    at = arr.type
    if pa.types.is_null(at) or isinstance(t, UnknownType):
        return [None] * len(arr)
    if isinstance(t, DateType) and pa.types.is_date(at):
        arr = arr.cast(pa.date32()).cast(pa.int32())
    elif isinstance(t, TimeType) and pa.types.is_time(at):
        arr = _micros(arr.cast(pa.int64() if at.bit_width == 64 else pa.int32()), at.unit)
    elif isinstance(t, (TimestampType, TimestamptzType)) and pa.types.is_timestamp(at):
        arr = _micros(arr.cast(pa.int64()), at.unit)
    elif isinstance(t, NANO_TIMESTAMPS) and pa.types.is_timestamp(at):
        arr = arr.cast(pa.timestamp("ns", at.tz)).cast(pa.int64())
    elif pa.types.is_string_view(at):
        arr = arr.cast(pa.large_string())
    elif pa.types.is_binary_view(at):
        arr = arr.cast(pa.large_binary())
    values = arr.to_pylist()
    if isinstance(t, DecimalType):
        return [_rescale(v, t.scale) for v in values] if _needs_rescale(arr, t) else values
    return values


def partition_tuples(arrays: list[pa.Array], types: list[IcebergType]) -> list[tuple]:
    """One tuple of internal values per row, one element per array.

    With no arrays (an unpartitioned spec) there is no row count to go by, and
    the result is empty.
    """
    if len(arrays) != len(types):
        raise ValueError(f"{len(arrays)} arrays but {len(types)} types")
    if not arrays:
        return []
    columns = [to_internal(a, t) for a, t in zip(arrays, types, strict=True)]
    return list(zip(*columns, strict=True))


def _micros(arr: pa.Array, unit: str) -> pa.Array:
    """int64 microseconds; nanoseconds are floored, as the spec converts them."""
    if unit == "us":
        return arr.cast(pa.int64())
    raw = arr.cast(pa.int64()).fill_null(0).to_numpy()
    micros = np.floor_divide(raw, 1000) if unit == "ns" else raw * _TO_MICROS[unit]
    return pa.array(micros, mask=arr.is_null().to_numpy(zero_copy_only=False))


def _needs_rescale(arr: pa.Array, t: DecimalType) -> bool:
    return not (pa.types.is_decimal(arr.type) and arr.type.scale == t.scale)


def _rescale(v: object, scale: int) -> Decimal | None:
    if v is None:
        return None
    d = v if isinstance(v, Decimal) else Decimal(str(v))
    return d.quantize(Decimal(1).scaleb(-scale), context=Context(prec=80))
