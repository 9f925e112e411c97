"""The columns Spark's own Parquet writer gets for an Iceberg table: the table's fields
with their Iceberg field ids, and each partition value computed as an extra column.

Invariants:
- :func:`unsupported` names what Spark cannot write as Iceberg would (then the pyarrow
  route writes); everything else is written with the table's exact field ids:
  top-level and struct fields carry ``parquet.field.id`` metadata, which Spark writes
  as Parquet field ids. Lists and maps are refused (Spark gives their element, key and
  value no id), as are uuid, fixed, time, nanosecond timestamps, and required fields
  inside structs.
- :func:`file_columns` yields exactly the table's fields in schema order (absent
  optional fields as nulls), cast to the table's types; a null in a required
  top-level column fails the write with SchemaMismatchError (``raise_error``).
- :func:`partition_columns` computes, per partition field, a column whose value
  (as Spark writes it into a ``name=value`` directory) :func:`partition_value` turns
  back into Iceberg's internal partition value: integers as they are, strings as
  ``x`` + the hex of their UTF-8 bytes (so no value is escaped, and an empty string
  is never taken for a null), null as Spark's default-partition name. Bucket runs our
  own transform in a vectorized Python UDF; the others are Spark expressions equal to
  Iceberg's transforms (floor division, code-point truncation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stream_sink.spark.errors import spark_error_message
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.schema import Schema
from stream_sink.table.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Truncate,
    Void,
    Year,
)
from stream_sink.table.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

if TYPE_CHECKING:
    from pyspark.sql import Column

FIELD_ID = "parquet.field.id"
PARTITION_PREFIX = "__ss_p"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_DAY_MICROS = 86_400_000_000
_HOUR_MICROS = 3_600_000_000
_WRITABLE = (
    BooleanType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DateType,
    TimestampType,
    TimestamptzType,
    StringType,
    BinaryType,
    DecimalType,
)


def unsupported(schema: Schema, spec: PartitionSpec) -> str | None:
    """Why Spark's Parquet writer cannot write this table's files (None: it can)."""
    for f in schema.fields:
        reason = _field_unsupported(f, top=True)
        if reason:
            return reason
    for pf in spec.fields:
        source = schema.find_field(pf.source_id)
        if not _transform_supported(pf.transform, source.field_type):
            return f"partition field {pf.name!r} ({pf.transform} of {source.field_type})"
    return None


def _field_unsupported(f: NestedField, top: bool) -> str | None:
    t = f.field_type
    if isinstance(t, StructType):
        for child in t.fields:
            reason = _field_unsupported(child, top=False)
            if reason:
                return reason
        return None
    if not isinstance(t, _WRITABLE):
        return f"field {f.name!r} of type {t}"
    if f.required and not top:
        return f"required field {f.name!r} inside a struct"
    return None


def _transform_supported(transform: Any, source: IcebergType) -> bool:
    if isinstance(transform, (Void, Bucket)):
        return True
    if isinstance(transform, Identity):
        return isinstance(
            source, (IntegerType, LongType, StringType, DateType, TimestamptzType, BooleanType)
        )
    if isinstance(transform, (Year, Month, Day)):
        return isinstance(source, (DateType, TimestamptzType))
    if isinstance(transform, Hour):
        return isinstance(source, TimestamptzType)
    if isinstance(transform, Truncate):
        return isinstance(source, (IntegerType, LongType, StringType))
    return False


# --- types and file columns -----------------------------------------------------------------


def spark_type(t: IcebergType) -> Any:
    """The Spark type of ``t``; struct fields carry their Iceberg field ids."""
    from pyspark.sql import types as T

    if isinstance(t, StructType):
        return T.StructType(
            [
                T.StructField(f.name, spark_type(f.field_type), True, {FIELD_ID: f.field_id})
                for f in t.fields
            ]
        )
    simple: dict[type, Callable[[], Any]] = {
        BooleanType: T.BooleanType,
        IntegerType: T.IntegerType,
        LongType: T.LongType,
        FloatType: T.FloatType,
        DoubleType: T.DoubleType,
        DateType: T.DateType,
        TimestamptzType: T.TimestampType,
        TimestampType: T.TimestampNTZType,
        StringType: T.StringType,
        BinaryType: T.BinaryType,
    }
    if isinstance(t, DecimalType):
        return T.DecimalType(t.precision, t.scale)
    return simple[type(t)]()


def file_columns(schema: Schema, present: Sequence[str], where: str) -> list[Column]:
    """The table's fields in schema order, cast, with field ids (see module doc)."""
    from pyspark.sql import functions as F

    out = []
    for f in schema.fields:
        target = spark_type(f.field_type)
        if f.name in present:
            col = F.col(f"`{f.name}`").cast(target)
            if f.required:
                message = spark_error_message(
                    "SchemaMismatchError",
                    f"data does not match table {where}: required column {f.name!r} has a null",
                )
                col = F.when(col.isNull(), F.raise_error(F.lit(message))).otherwise(col)
        else:
            col = F.lit(None).cast(target)
        out.append(col.alias(f.name, metadata={FIELD_ID: f.field_id}))
    return out


# --- partition values ------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionColumn:
    """One partition field as a column Spark partitions the files by."""

    name: str
    column: Any
    is_string: bool
    is_bool: bool = False


def partition_columns(spec: PartitionSpec, schema: Schema) -> list[PartitionColumn | None]:
    """Per partition field its column (None for void: its value is always null)."""
    return [
        None
        if isinstance(pf.transform, Void)
        else _partition_column(f"{PARTITION_PREFIX}{i}", pf.transform, schema, pf.source_id)
        for i, pf in enumerate(spec.fields)
    ]


def _partition_column(name: str, transform: Any, schema: Schema, source_id: int) -> PartitionColumn:
    from pyspark.sql import functions as F

    path = schema.find_column_name(source_id)
    source = schema.find_field(source_id).field_type
    ref = ".".join(f"`{p}`" for p in path.split("."))
    col = F.expr(ref)
    if isinstance(transform, Bucket):
        if isinstance(source, (IntegerType, LongType)):  # pandas would turn them into floats
            hashed = bucket_udf(transform, source)(F.coalesce(col, F.lit(0).cast("long")))
            return PartitionColumn(name, F.when(col.isNotNull(), hashed), False)
        return PartitionColumn(name, bucket_udf(transform, source)(col), False)
    if isinstance(transform, Identity):
        if isinstance(source, StringType):
            return PartitionColumn(name, _hex_string(col), True)
        if isinstance(source, BooleanType):
            return PartitionColumn(name, col.cast("int"), False, is_bool=True)
        if isinstance(source, DateType):
            return PartitionColumn(name, F.expr(f"unix_date({ref})"), False)
        if isinstance(source, TimestamptzType):
            return PartitionColumn(name, F.expr(f"unix_micros({ref})"), False)
        return PartitionColumn(name, col, False)
    if isinstance(transform, Truncate):
        w = transform.width
        if isinstance(source, StringType):
            return PartitionColumn(name, _hex_string(F.expr(f"substring({ref}, 1, {w})")), True)
        return PartitionColumn(name, F.expr(_wrapping_truncate(ref, w, source)), False)
    return PartitionColumn(name, F.expr(_time_expr(transform, source, ref)), False)


def _wrapping_truncate(ref: str, width: int, source: IcebergType) -> str:
    """``v - floormod(v, W)`` wrapping at the type's minimum as Java's integer math does
    (computed in decimals: Spark's ANSI mode refuses integer overflow)."""
    bits, target = (32, "int") if isinstance(source, IntegerType) else (64, "bigint")
    half, full = 2 ** (bits - 1), 2**bits
    exact = f"cast({ref} as decimal(21,0)) - pmod({ref}, {width})"
    return f"cast(pmod({exact} + {half}BD, {full}BD) - {half}BD as {target})"


def _hex_string(col: Any) -> Any:
    from pyspark.sql import functions as F

    return F.concat(F.lit("x"), F.hex(F.encode(col, "UTF-8")))


def _floor_div(expr: str, unit: int) -> str:
    return f"(({expr}) - pmod(({expr}), {unit}L)) div {unit}L"


def _time_expr(transform: Any, source: IcebergType, ref: str) -> str:
    if isinstance(source, DateType):
        days = f"unix_date({ref})"
    else:
        days = _floor_div(f"unix_micros({ref})", _DAY_MICROS)
    if isinstance(transform, Hour):
        return _floor_div(f"unix_micros({ref})", _HOUR_MICROS)
    if isinstance(transform, Day):
        return f"cast({days} as int)"
    date = f"date_from_unix_date(cast({days} as int))"
    if isinstance(transform, Year):
        return f"year({date}) - 1970"
    return f"(year({date}) - 1970) * 12 + month({date}) - 1"


def bucket_udf(transform: Bucket, source: IcebergType) -> Any:
    """A vectorized UDF: Iceberg's bucket of ``source`` values (our own transform)."""
    from pyspark.sql.functions import pandas_udf

    from stream_sink.table.arrow import type_to_arrow

    arrow_type = type_to_arrow(source)

    def buckets(values: Any) -> Any:
        import pyarrow as pa

        arr = pa.array(values, type=arrow_type, from_pandas=True)
        return transform.apply(arr, source).to_pandas()

    import pandas as pd

    buckets.__annotations__ = {"values": pd.Series, "return": pd.Series}  # Spark reads these
    return pandas_udf(buckets, "int")  # type: ignore[call-overload]


def partition_value(column: PartitionColumn | None, raw: str | None) -> Any:
    """Iceberg's internal partition value of a ``name=raw`` directory of ``column``."""
    if column is None or raw is None or raw == NULL_PARTITION:
        return None
    if column.is_string:
        return bytes.fromhex(raw[1:]).decode("utf-8")
    value = int(raw)
    return bool(value) if column.is_bool else value
