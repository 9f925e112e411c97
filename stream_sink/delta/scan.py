"""Reading a Delta snapshot's rows: each live file, its partition values as constant
columns, in the table schema's column order, without the rows its deletion vector
deletes.

Columns are resolved in each file by :class:`~.column_mapping.ColumnMapping` (display
names, physical names or field ids; missing ones read as null; widened types cast), and
INT96 timestamps are read at microseconds, so no value of their range overflows.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.io.fileio import FileIO

from .actions import AddFile
from .deletion_vectors import deleted_rows
from .features import check_readable
from .paths import absolute_location, parse_partition_value
from .snapshot import DeltaSnapshot

POSITION = "__ss_row_position"
"""The column :func:`read_file` adds with ``positions=True``: each row's index in the file."""


def read_file(
    snapshot: DeltaSnapshot,
    io: FileIO,
    add: AddFile,
    schema: pa.Schema | None = None,
    *,
    positions: bool = False,
) -> pa.Table:
    """The live rows of one data file with its partition columns filled in (and their
    positions in the file as :data:`POSITION` when ``positions``)."""
    schema = schema or snapshot.arrow_schema
    mapping = snapshot.column_mapping
    location = absolute_location(snapshot.location, add.path)
    data_cols = [f.name for f in schema if f.name not in snapshot.partition_columns]
    with io.open_input(location) as f:
        pf = pq.ParquetFile(f, coerce_int96_timestamp_unit="us")
        found = mapping.read(pf.schema_arrow, data_cols)
        raw = pf.read(columns=sorted({c for c in found.values() if c is not None}))
    n = raw.num_rows
    cols = []
    for field in schema:
        if field.name in snapshot.partition_columns:
            raw_value = add.partition_values.get(mapping.physical_name(field.name))
            value = parse_partition_value(raw_value, field.type, field.name)
            cols.append(pa.array([value] * n, field.type))
        else:
            name = found[field.name]
            col = None if name is None else raw.column(name)
            cols.append(mapping.conform(col, field.name, field.type, n))
    out = pa.Table.from_arrays(cols, schema=schema)
    if positions:
        out = out.append_column(POSITION, pa.array(np.arange(n, dtype=np.int64)))
    if add.deletion_vector is not None:
        where = f"Delta table {snapshot.location}, file {add.path}"
        deleted = deleted_rows(snapshot.location, io, add.deletion_vector, where)
        keep = np.ones(n, dtype=bool)
        keep[deleted[deleted < n].astype(np.int64)] = False
        out = out.filter(pa.array(keep))
    return out


def read_files(snapshot: DeltaSnapshot, io: FileIO, files: Iterable[AddFile]) -> pa.Table:
    schema = snapshot.arrow_schema
    where = f"Delta table {snapshot.location}"
    check_readable(snapshot.protocol, where, snapshot.metadata.schema_string)
    parts = [read_file(snapshot, io, add, schema) for add in files]
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts)


def read_snapshot(snapshot: DeltaSnapshot, io: FileIO) -> pa.Table:
    """Every live row of ``snapshot``."""
    return read_files(snapshot, io, sorted(snapshot.files.values(), key=lambda a: a.path))
