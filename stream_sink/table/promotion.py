"""Safe type promotion (spec: "Schema Evolution" — allowed type promotions)."""

from __future__ import annotations

from stream_sink.table.types import (
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    TimestampType,
    UnknownType,
)


def is_safe_promotion(source: IcebergType, target: IcebergType) -> bool:
    """True when every value of ``source`` is exactly representable in ``target``."""
    if source == target:
        return True
    if isinstance(source, UnknownType):
        return True  # v3: an unknown column holds only nulls, and no file stores it
    if isinstance(source, IntegerType) and isinstance(target, LongType):
        return True
    if isinstance(source, FloatType) and isinstance(target, DoubleType):
        return True
    if isinstance(source, DateType) and isinstance(target, TimestampType):
        return False  # allowed in v3 only
    if isinstance(source, DecimalType) and isinstance(target, DecimalType):
        return source.scale == target.scale and target.precision >= source.precision
    return False
