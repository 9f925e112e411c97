"""Debezium's JSON values converted exactly to the row schema's types.

Debezium writes a value in the encoding its Kafka Connect schema names: a date as an
int of days, a ``timestamp`` as a long of micro- or milliseconds, a ``timestamptz`` as
an ISO string, a ``numeric`` as the base64 bytes of its unscaled value (or a string,
with ``decimal.handling.mode=string``). :func:`from_debezium` parses each column with
:func:`parse_type` (the encoding) and turns it into its row schema type with
:func:`converted`.

The encoding of a column is its Spark metadata :data:`WIRE` when the row schema came
from the events' Connect schemas (:mod:`stream_sink.table.connect_schema` names it), else
it follows from the column's type, reading what the JSON holds:

===================  =========================================================
type                 JSON value accepted
===================  =========================================================
decimal(p, s)        a string or number with at most ``s`` fractional digits
date                 an int of days since 1970-01-01, or an ISO date
timestamp_ntz        a long of microseconds (Debezium's default), or ISO text
timestamp            a long of microseconds, or ISO text with an offset
===================  =========================================================

Invariants: a conversion is exact or it fails. A value that does not convert without
loss (a fraction finer than the scale, a number too wide, nanoseconds finer than
microseconds, text that is not a date) stops the query with ValidationError naming the
column, its type, the value and the event; nothing of the batch is written. Nulls stay
null. Columns of other types, and fields nested in structs or arrays, are parsed as
their type says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from stream_sink.table.connect_schema import WIRE_KEY

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructField, StructType

WIRE = WIRE_KEY.decode()
"""Spark column metadata: the encoding of a column's JSON value (connect_schema's)."""

Fail = Callable[[str, "Column"], "Column"]
"""``fail(message, value)``: a column that stops the query naming the event."""

_TWO_POW_64 = "18446744073709551616"
_PLAIN_NUMBER = "^[+-]?[0-9]*[.]?[0-9]*$"
_DIGITS = "^[+-]?[0-9]+$"


def spark_schema(schema: pa.Schema) -> StructType:
    """``schema`` as a Spark StructType, each field's wire encoding kept in its metadata."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    def spark_type(t: pa.DataType) -> DataType:
        try:
            return from_arrow_type(t, prefer_timestamp_ntz=True)
        except TypeError:  # a pyspark without the argument reads naive timestamps as NTZ
            return from_arrow_type(t)

    fields = []
    for f in schema:
        wire = (f.metadata or {}).get(WIRE_KEY)
        meta = {WIRE: wire.decode()} if wire else {}
        fields.append(StructField(f.name, spark_type(f.type), f.nullable, meta))
    return StructType(fields)


def encoding(field: StructField) -> str | None:
    """How ``field``'s JSON value encodes its type (None: parsed as the type itself)."""
    from pyspark.sql.types import DateType, DecimalType, TimestampNTZType, TimestampType

    named = (field.metadata or {}).get(WIRE)
    if named:
        return str(named)
    for kind, name in (
        (DecimalType, "text-decimal"),
        (DateType, "text-date"),
        (TimestampNTZType, "text-timestamp-ntz"),
        (TimestampType, "text-timestamp"),
    ):
        if isinstance(field.dataType, kind):
            return name
    return None


def parse_type(field: StructField) -> DataType:
    """The Spark type to read ``field``'s JSON value as (before :func:`converted`)."""
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField
    from pyspark.sql.types import StructType as Struct

    wire = encoding(field)
    if wire is None:
        return field.dataType
    if wire == "unscaled":
        return BinaryType()
    if wire == "variable-scale":
        return Struct([StructField("scale", IntegerType()), StructField("value", BinaryType())])
    if wire.startswith("text-") or wire == "iso-instant":
        return StringType()
    return LongType()


def parse_schema(rows: StructType) -> StructType:
    """``rows`` with every field typed as its JSON value is read (:func:`parse_type`)."""
    from pyspark.sql.types import StructField, StructType

    return StructType(
        [StructField(f.name, parse_type(f), f.nullable, f.metadata) for f in rows.fields]
    )


def needs_conversion(rows: StructType) -> bool:
    return any(encoding(f) is not None for f in rows.fields)


def converted(raw: str, field: StructField, fail: Fail) -> Column:
    """Column ``raw`` (read as :func:`parse_type`) as ``field``'s type, or a failure."""
    from pyspark.sql import functions as F

    wire = encoding(field)
    if wire is None:
        return F.col(raw)
    target = field.dataType.simpleString()
    x = f"`{raw}`"
    value, exact = _conversion(wire, x, target)
    shown = F.expr(_decimal_text(wire, x, target) if wire in _UNSCALED else f"string({x})")
    message = f"column {field.name!r} ({target}, from {wire}): value "
    return F.when(F.col(raw).isNull(), F.lit(None).cast(field.dataType)).otherwise(
        F.when(F.expr(f"({value}) IS NOT NULL AND ({exact})"), F.expr(value)).otherwise(
            fail(message, shown).cast(field.dataType)
        )
    )


def _conversion(wire: str, x: str, target: str) -> tuple[str, str]:
    """SQL for the converted value of ``x`` and for "the conversion lost nothing"."""
    if wire == "text-decimal":
        value = f"try_cast({x} AS {target})"
        fraction = f"length(regexp_extract({x}, '[.]([0-9]*?)0*$', 1))"
        exact = (
            f"CASE WHEN {x} rlike '{_PLAIN_NUMBER}' THEN {fraction} <= {_scale(target)} "
            f"ELSE double({value}) = try_cast({x} AS double) END"
        )
        return value, exact
    if wire in _UNSCALED:
        return _unscaled(wire, x, target)
    if wire == "days":
        return f"date_from_unix_date(int({x}))", "true"
    if wire == "text-date":
        return (
            f"CASE WHEN {x} rlike '{_DIGITS}' THEN date_from_unix_date(try_cast({x} AS int)) "
            f"ELSE try_cast({x} AS date) END",
            "true",
        )
    if wire in ("millis", "micros", "nanos"):
        micros, exact = _micros(wire, x)
        return _ntz_from_micros(micros), exact
    if wire == "text-timestamp-ntz":
        return (
            f"CASE WHEN {x} rlike '{_DIGITS}' THEN {_ntz_from_micros(f'bigint({x})')} "
            f"ELSE try_cast({x} AS timestamp_ntz) END",
            "true",
        )
    if wire in ("text-timestamp", "iso-instant"):
        return (
            f"CASE WHEN {x} rlike '{_DIGITS}' THEN timestamp_micros(bigint({x})) "
            f"ELSE try_cast({x} AS timestamp) END",
            "true",
        )
    if wire.startswith("time-"):
        return _micros(wire.removeprefix("time-"), x)
    raise ValueError(f"unknown wire encoding {wire!r}")


def _micros(unit: str, x: str) -> tuple[str, str]:
    """Microseconds from a count of ``unit`` (nanoseconds only when whole)."""
    if unit == "millis":
        return f"bigint({x}) * 1000", "true"
    if unit == "nanos":
        return f"bigint({x}) div 1000", f"{x} % 1000 = 0"
    return f"bigint({x})", "true"


def _ntz_from_micros(micros: str) -> str:
    """A timestamp_ntz ``micros`` after 1970-01-01 00:00, whatever the session time zone."""
    days = f"(({micros}) div 86400000000)"
    rest = f"({micros} - {days} * 86400000000)"
    return (
        f"TIMESTAMP_NTZ'1970-01-01 00:00:00' + make_dt_interval(int({days}), 0, 0, "
        f"CAST({rest} AS decimal(18,0)) / 1000000)"
    )


_UNSCALED = ("unscaled", "variable-scale")


def _unscaled_parts(wire: str, x: str, target: str) -> tuple[str, str]:
    """SQL for the unscaled value as decimal text and its scale: from Connect's
    big-endian two's complement bytes (at most 16, 38 digits) and the field's scale
    (``Decimal``) or each value's (``VariableScaleDecimal``)."""
    if wire == "variable-scale":
        data, scale = f"{x}.value", f"{x}.scale"
    else:
        data, scale = x, _scale(target)
    h = f"hex({data})"
    pad = f"CASE WHEN substr({h}, 1, 1) >= '8' THEN 'F' ELSE '0' END"
    wide = f"lpad({h}, 32, {pad})"
    hi = f"CAST(conv(substr({wide}, 1, 16), 16, -10) AS decimal(20,0))"
    lo = f"CAST(conv(substr({wide}, 17, 16), 16, 10) AS decimal(20,0))"
    unscaled = (
        f"CASE WHEN length({data}) BETWEEN 1 AND 16 THEN "
        f"string({hi} * CAST('{_TWO_POW_64}' AS decimal(20,0)) + {lo}) END"
    )
    return unscaled, scale


def _decimal_text(wire: str, x: str, target: str) -> str:
    """The value as ``<unscaled>E<-scale>`` (its hex bytes when wider than 16 bytes)."""
    unscaled, scale = _unscaled_parts(wire, x, target)
    data = f"{x}.value" if wire == "variable-scale" else x
    return f"coalesce(concat({unscaled}, 'E', string(-({scale}))), hex({data}))"


def _unscaled(wire: str, x: str, target: str) -> tuple[str, str]:
    """A decimal from Connect's unscaled bytes (:func:`_unscaled_parts`): exact when the
    value's scale fits the target's, or the digits beyond it are zeros."""
    unscaled, scale = _unscaled_parts(wire, x, target)
    value = f"try_cast(concat({unscaled}, 'E', string(-({scale}))) AS {target})"
    lost = f"({scale}) - {_scale(target)}"
    exact = f"({lost}) <= 0 OR endswith({unscaled}, repeat('0', {lost}))"
    return value, exact


def _scale(decimal_type: str) -> str:
    """The scale of ``decimal(p,s)`` as SQL text."""
    return decimal_type.split(",")[1].rstrip(")")
