"""Schema evolution driven by the stream: ``IcebergSink(schema_evolution=...)``.

``"none"`` (default): a DataFrame that does not fit the table stops the query.
``"add-columns"``: columns the table lacks are added (optional, fresh field ids).
``"compatible"``: also widens types (int→long, float→double, decimal precision) and
makes a required column optional when the DataFrame declares it nullable (identifier
fields excepted: they stay required and a null in them is refused).

Invariants:
- The change is committed (a metadata-only commit) BEFORE any file of the batch is
  written, and the writers are then built from the evolved schema, so every data file
  carries field ids the table has. A crash after the schema commit and before the data
  commit leaves a table with an extra optional column and no data written against a
  schema it lacks; the replayed batch finds the change already made and commits
  nothing more (the change is computed against the table's current schema).
- Every user column is added, order columns included; only the sink's control columns
  (row kind, routing, ``from_debezium``'s, see :mod:`.cdc.control_columns`) never are.
- Columns are never dropped or narrowed; incompatible changes (string→int, narrowing)
  raise IncompatibleSchemaChangeError naming the column, both types and the option.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from stream_sink.exceptions import IncompatibleSchemaChangeError, SchemaMismatchError
from stream_sink.failpoints import AFTER_SCHEMA_CHANGE, failpoint
from stream_sink.spark import schema_check
from stream_sink.spark.cdc.control_columns import control_columns
from stream_sink.spark.options import SinkOptions

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from stream_sink.table.table import Table

HINT_NONE = (
    "; schema_evolution='add-columns' adds new columns to the table, 'compatible' also "
    "widens types and makes columns optional"
)
HINT_ADD = "; schema_evolution='compatible' allows widening (int→long, float→double, decimal)"


def evolve_for_batch(spark_schema: StructType, table: Table, options: SinkOptions) -> bool:
    """Commit the schema change the DataFrame needs; True when the table's schema changed."""
    mode = options.schema_evolution
    if mode == "none":
        return False
    data = schema_check.spark_to_arrow(spark_schema, table.name)
    extra = control_columns(
        spark_schema, row_kind_column=options.row_kind_column, table_column=options.table_column
    )
    written = pa.schema([f for f in data if f.name not in extra])
    before = table.metadata.current_schema_id
    compatible = mode == "compatible"
    try:
        with table.update_schema(make_optional_from_data=compatible) as update:
            update.union_by_name(written, promote_types=compatible)
    except IncompatibleSchemaChangeError as e:
        hint = HINT_ADD if not compatible and "not allowed" in str(e) else ""
        raise IncompatibleSchemaChangeError(
            f"table {table.name}: the stream's schema cannot be merged into the table "
            f"(schema_evolution={mode!r}): {e}{hint}"
        ) from e
    changed = table.metadata.current_schema_id != before
    if changed:
        failpoint(AFTER_SCHEMA_CHANGE)
    return changed


def with_evolution_hint(error: SchemaMismatchError, options: SinkOptions) -> SchemaMismatchError:
    """``error`` (the DataFrame does not fit the table) naming the option that would help."""
    if options.schema_evolution != "none" or isinstance(error, IncompatibleSchemaChangeError):
        return error
    text = str(error)
    if "not in the table" in text or "in the data but" in text:
        return type(error)(text + HINT_NONE)
    return error
