"""Reading a Delta snapshot's rows: each live file, its partition values as constant
columns, in the table schema's column order. Deletion vectors are refused earlier (the
protocol check), so every live row of every file is live.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.io.fileio import FileIO

from .actions import AddFile
from .features import check_readable
from .paths import absolute_location, parse_partition_value
from .snapshot import DeltaSnapshot


def read_file(
    snapshot: DeltaSnapshot, io: FileIO, add: AddFile, schema: pa.Schema | None = None
) -> pa.Table:
    """The rows of one data file with its partition columns filled in."""
    schema = schema or snapshot.arrow_schema
    location = absolute_location(snapshot.location, add.path)
    data_cols = [f.name for f in schema if f.name not in snapshot.partition_columns]
    with io.open_input(location) as f:
        raw = pq.read_table(f, columns=[c for c in data_cols])
    cols = []
    for field in schema:
        if field.name in snapshot.partition_columns:
            value = parse_partition_value(
                add.partition_values.get(field.name), field.type, field.name
            )
            cols.append(pa.array([value] * raw.num_rows, field.type))
        else:
            cols.append(raw.column(field.name).cast(field.type))
    return pa.Table.from_arrays(cols, schema=schema)


def read_files(snapshot: DeltaSnapshot, io: FileIO, files: Iterable[AddFile]) -> pa.Table:
    schema = snapshot.arrow_schema
    check_readable(snapshot.protocol, f"Delta table {snapshot.location}")
    parts = [read_file(snapshot, io, add, schema) for add in files]
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts)


def read_snapshot(snapshot: DeltaSnapshot, io: FileIO) -> pa.Table:
    """Every live row of ``snapshot``."""
    return read_files(snapshot, io, sorted(snapshot.files.values(), key=lambda a: a.path))
