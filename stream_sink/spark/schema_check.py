"""Checks of a micro-batch's DataFrame schema against the table, before anything is written.

Invariants:
- Columns are matched by name; types must be equal or a safe widening (int→long,
  float→double, decimal precision); every error names the table and the columns.
- Nullability is not judged here: Spark marks almost every column nullable, so
  nulls in required columns are refused per value by the writers.
- In CDC modes the row-kind column and the order column(s) may be extra columns (they
  are not written); the equality fields must be table columns, and a partitioned
  upsert table must have every partition source column among them (Flink's rule:
  otherwise an update moving a row to another partition would leave the old row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from stream_sink.exceptions import (
    InvalidOptionError,
    MissingColumnError,
    SchemaMismatchError,
)
from stream_sink.table.arrow import schema_from_arrow
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.schema import Schema, check_compatible_write
from stream_sink.table.types import DoubleType, FloatType, PrimitiveType

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from stream_sink.spark.options import SinkOptions


def spark_to_arrow(spark_schema: StructType, where: str) -> pa.Schema:
    """The Arrow schema Spark's ``mapInArrow`` hands to Python for ``spark_schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        try:
            return to_arrow_schema(spark_schema, timezone="UTC")
        except TypeError:  # pyspark 3.5 has no timezone argument
            return to_arrow_schema(spark_schema)
    except Exception as e:  # PySparkTypeError and friends
        raise SchemaMismatchError(
            f"{where}: the DataFrame has a column Arrow cannot carry: {e}"
        ) from e


def check_data_schema(
    data: pa.Schema, table_schema: Schema, *, ignore: Sequence[str] = (), where: str
) -> None:
    """Raise SchemaMismatchError unless ``data`` (minus ``ignore``) fits ``table_schema``."""
    kept = [f for f in data if f.name not in ignore]
    names = [f.name for f in kept]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SchemaMismatchError(f"data does not match table {where}: duplicate columns {dupes}")
    shape = schema_from_arrow(pa.schema([_required(f) for f in kept]))
    check_compatible_write(table_schema, shape, where)


def non_table_columns(options: SinkOptions, table_schema: Schema) -> tuple[str, ...]:
    """Columns the DataFrame may carry that are not written: row kind, order columns."""
    extra = [options.row_kind_column] if options.row_kind_column else []
    extra += [c for c in options.order_by if not table_schema.has_field(c)]
    return tuple(c for c in extra if not table_schema.has_field(c))


def resolve_equality_fields(
    options: SinkOptions, table_schema: Schema, where: str
) -> tuple[str, ...]:
    """The key of a CDC sink: the option, else the table's identifier fields."""
    names = options.equality_fields or tuple(table_schema.identifier_field_names)
    if not names:
        raise InvalidOptionError(
            f"{where}: mode={options.mode!r} needs equality fields: pass equality_fields= "
            "or create the table with identifier_fields="
        )
    for name in names:
        if not table_schema.has_field(name):
            raise MissingColumnError(
                f"{where}: equality field {name!r} is not a table column "
                f"(columns: {table_schema.column_names})"
            )
        ftype = table_schema.find_type(name)
        if not isinstance(ftype, PrimitiveType) or isinstance(ftype, (FloatType, DoubleType)):
            raise InvalidOptionError(
                f"{where}: equality field {name!r} has type {ftype}; keys must be primitive "
                "and not float/double"
            )
    return tuple(names)


def check_cdc_columns(
    data: pa.Schema, options: SinkOptions, keys: Sequence[str], where: str
) -> None:
    """The row kind, order and key columns a CDC sink needs are in the DataFrame."""
    needed = [(c, "order") for c in options.order_by] + [(k, "equality field") for k in keys]
    if options.row_kind_column:
        needed.insert(0, (options.row_kind_column, "row kind"))
    for name, role in needed:
        if name not in data.names:
            raise MissingColumnError(
                f"{where}: the {role} column {name!r} is missing from the DataFrame "
                f"(columns: {data.names})"
            )
    if options.row_kind_column:
        kind = data.field(options.row_kind_column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise SchemaMismatchError(
                f"{where}: row kind column {options.row_kind_column!r} must be a string column "
                f"of +I/-U/+U/-D, found {kind}"
            )


def check_upsert_partitioning(
    spec: PartitionSpec, table_schema: Schema, keys: Sequence[str], where: str
) -> None:
    """Every partition source column of an upsert table must be an equality field."""
    missing = sorted(
        {
            table_schema.find_column_name(f.source_id)
            for f in spec.fields
            if table_schema.find_column_name(f.source_id) not in keys
        }
    )
    if missing:
        raise InvalidOptionError(
            f"{where}: upsert into a table partitioned by {missing} needs those source "
            f"column(s) among the equality fields {list(keys)}; otherwise an update that "
            "changes the partition would leave the old row alive. Add them to "
            "equality_fields, or use mode='changelog' with full before-images"
        )


def _required(f: pa.Field) -> pa.Field:
    """``f`` with every level marked non-null (nullability is checked on values)."""
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_required(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_map(t):
        t = pa.map_(_required(t.key_field), _required(t.item_field))
    elif pa.types.is_list(t):
        t = pa.list_(_required(t.value_field))
    elif pa.types.is_large_list(t):
        t = pa.large_list(_required(t.value_field))
    return pa.field(f.name, t, nullable=False)
