"""Which columns of a stream are the sink's own control columns, not user data.

One rule for every path that decides a table's columns from a DataFrame: the tables a
routed sink creates, schema evolution (one table or routed), the Delta tables
``DeltaSink`` and the Data Source route create. A control column is

- the row kind column the sink is given (``row_kind_column``, ``row-kind-column``);
- the routing column of a routed sink (``table_column``);
- a column ``from_debezium`` adds: ``_row_kind``, ``_cdc_order``, ``_cdc_key_fields``,
  the transaction columns (``_transaction_id``, ``_data_collection``,
  ``_transaction_key``, ``_transaction_marker``), or the names it was told to give them
  (it marks them in the column's Spark metadata).

Invariants:
- Every other column is user data: it is never dropped on the way into a table the sink
  creates, and schema evolution adds it like any other column. An ``order_by`` column
  such as ``seq`` or ``lsn`` is data; ``from_debezium``'s ``_cdc_order`` struct is not.
- A marked column renamed by the user is data again (the mark records the name given).
- A batch with the transaction columns reaches only a sink that holds source
  transactions (:func:`check_columns`): anywhere else its BEGIN/END rows would be
  written as changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stream_sink.exceptions import TransactionMetadataError

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import StructType

ROW_KIND_COLUMN = "_row_kind"
ORDER_COLUMN = "_cdc_order"
KEY_FIELDS_COLUMN = "_cdc_key_fields"
TRANSACTION_ID_COLUMN = "_transaction_id"
DATA_COLLECTION_COLUMN = "_data_collection"
TRANSACTION_KEY_COLUMN = "_transaction_key"
TRANSACTION_MARKER_COLUMN = "_transaction_marker"
TRANSACTION_COLUMNS = (
    TRANSACTION_ID_COLUMN,
    DATA_COLLECTION_COLUMN,
    TRANSACTION_KEY_COLUMN,
    TRANSACTION_MARKER_COLUMN,
)
"""The columns ``from_debezium(..., transactions=True)`` adds: an event's transaction id,
its data collection as Debezium's END events name it, its Kafka key, and (on the rows of
the transaction topic's BEGIN/END events, every other column null) the event itself."""
DEBEZIUM_COLUMNS = (ROW_KIND_COLUMN, ORDER_COLUMN, KEY_FIELDS_COLUMN, *TRANSACTION_COLUMNS)
"""The names ``from_debezium`` gives its columns by default."""
MARK = "stream_sink.control"
"""Spark column metadata key: the name ``from_debezium`` gave its column."""


def marked(column: Column, name: str) -> Column:
    """``column`` named ``name`` and marked as a control column."""
    return column.alias(name, metadata={MARK: name})


def control_columns(
    schema: StructType, *, row_kind_column: str | None = None, table_column: str | None = None
) -> frozenset[str]:
    """The columns of ``schema`` that are the sink's own (see the module docstring)."""
    named = {c for c in (row_kind_column, table_column) if c}
    out = set()
    for f in schema.fields:
        mark = (f.metadata or {}).get(MARK)
        if f.name in named or f.name in DEBEZIUM_COLUMNS or mark == f.name:
            out.add(f.name)
    return frozenset(out)


def data_columns(
    schema: StructType, *, row_kind_column: str | None = None, table_column: str | None = None
) -> tuple[str, ...]:
    """The columns of ``schema`` that are user data, in order."""
    control = control_columns(schema, row_kind_column=row_kind_column, table_column=table_column)
    return tuple(n for n in schema.fieldNames() if n not in control)


def check_columns(schema: StructType, *, gate: bool) -> None:
    """A batch with the transaction columns needs the gate, and the gate needs them
    (TransactionMetadataError saying which side to fix)."""
    names = set(schema.fieldNames())
    if not gate and TRANSACTION_MARKER_COLUMN in names:
        raise TransactionMetadataError(
            "the micro-batch carries source transactions (from_debezium(..., "
            "transactions=True)) but the sink does not hold them: pass "
            "transactions='debezium' to IcebergSink (DeltaSink and format('stream_sink') "
            "hold none), or drop transactions=True"
        )
    missing = [c for c in TRANSACTION_COLUMNS if c not in names]
    if gate and missing:
        raise TransactionMetadataError(
            f"transactions='debezium': the micro-batch lacks {', '.join(missing)}; build it "
            "with from_debezium(..., transactions=True) and subscribe the "
            "<topic.prefix>.transaction topic in the same query"
        )
