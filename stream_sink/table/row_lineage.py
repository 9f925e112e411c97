"""Row lineage (v3, spec "Row Lineage"): the ``_row_id`` and
``_last_updated_sequence_number`` metadata columns.

Invariants:
- A row's ``_row_id`` is the value stored in its data file when not null, else the
  file's ``first_row_id`` plus the row's position in the file; its
  ``_last_updated_sequence_number`` the stored value, else the file's data sequence
  number. A file without a ``first_row_id`` (committed before the table was v3)
  gives null for both.
- A writer that moves existing rows (compaction) writes both columns with the
  values read, so rows keep their ids; new rows are written without them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.table.schema import Schema
from stream_sink.table.types import LongType, NestedField

ROW_ID = NestedField(
    2147483540, "_row_id", LongType(), False, "Implicit row ID that is automatically assigned"
)
LAST_UPDATED_SEQUENCE_NUMBER = NestedField(
    2147483539,
    "_last_updated_sequence_number",
    LongType(),
    False,
    "Sequence number when the row was last updated",
)
LINEAGE_FIELDS = (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)
LINEAGE_IDS = frozenset(f.field_id for f in LINEAGE_FIELDS)
LINEAGE_NAMES = {f.name: f for f in LINEAGE_FIELDS}


def with_lineage(schema: Schema) -> Schema:
    """``schema`` plus the two lineage columns (what a rewrite of existing rows writes)."""
    return Schema(
        *schema.fields,
        *LINEAGE_FIELDS,
        schema_id=schema.schema_id,
        identifier_field_ids=list(schema.identifier_field_ids),
    )


def fill_lineage(
    table: pa.Table,
    names: dict[int, str],
    first_row_id: int | None,
    data_sequence_number: int | None,
    positions: np.ndarray,
) -> pa.Table:
    """``table`` (rows at ``positions`` of their file) with its lineage columns
    (named per field id in ``names``) inherited where null, or null throughout when
    the file has no ``first_row_id``."""
    for fid, name in names.items():
        i = table.schema.get_field_index(name)
        if first_row_id is None:
            value = pa.nulls(table.num_rows, pa.int64())
        elif fid == ROW_ID.field_id:
            value = pc.coalesce(table.column(i), pa.array(positions + first_row_id, pa.int64()))
        else:
            seq = pa.scalar(data_sequence_number, pa.int64())
            value = pc.coalesce(table.column(i), seq)
        table = table.set_column(i, table.field(i), value)
    return table
