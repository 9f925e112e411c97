"""Reading one file scan task: data file rows minus deleted rows, filtered, projected.

The data file is Parquet, ORC or Avro (:mod:`stream_sink.read.data_files`). Per chunk of
it (a Parquet row group, an ORC stripe, a whole Avro file): skip it when every row in it
is position-deleted or when its column statistics show no row can pass the residual
filter (Parquet's, :mod:`stream_sink.read.row_groups`); else read the needed columns by
field id, drop the rows position deletes name, drop rows failing the residual filter,
drop rows whose equality key is deleted, keep the output columns.

The equality-deleted keys are loaded on a second thread while the first row group is
read and filtered (Parquet decoding releases the GIL); a failure loading them is raised
by the task even when no row group needed them.

Invariant: output tables have exactly the Arrow schema of the scan's output
fields (``schema_to_arrow`` of them), whatever schema the file was written with.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from stream_sink.exceptions import CorruptMetadataError, UnsupportedError, ValidationError
from stream_sink.read.arrow_filter import to_arrow_expression
from stream_sink.read.binding import referenced_field_ids
from stream_sink.read.data_files import ChunkFilter, NoChunkFilter, OpenFile, open_data_file
from stream_sink.read.deletes import DeleteReader, EqualityKeys, position_mask
from stream_sink.read.expressions import AlwaysTrue, Expression
from stream_sink.read.file_projection import FileProjection
from stream_sink.read.planner import FileScanTask
from stream_sink.table.arrow import field_to_arrow
from stream_sink.table.name_mapping import table_name_mapping
from stream_sink.table.row_lineage import LINEAGE_IDS, fill_lineage
from stream_sink.table.schema import Schema
from stream_sink.table.table import Table
from stream_sink.table.transforms import Identity
from stream_sink.table.types import NestedField


class TaskReader:
    """Reads tasks of one scan of ``table`` with schema ``schema`` into ``output`` fields."""

    def __init__(self, table: Table, schema: Schema, output: Sequence[NestedField]) -> None:
        self._table = table
        self._schema = schema
        self._output = list(output)
        self.output_schema = pa.schema([field_to_arrow(f) for f in self._output])
        self.deletes = DeleteReader(table.io, table.name, self._field_for_id)
        self._mapping = table_name_mapping(table.metadata.properties, f"table {table.name}")

    def read(self, task: FileScanTask) -> Iterator[pa.Table]:
        positions = self.deletes.positions_for(task.delete_files, task.data_file.file_path)
        id_sets = self.deletes.equality_id_sets(task.delete_files)
        if not id_sets:
            yield from self._read(task, positions, id_sets, None)
            return
        with ThreadPoolExecutor(max_workers=1) as loader:
            keys = loader.submit(self.deletes.equality_keys, task.delete_files)
            yield from self._read(task, positions, id_sets, keys)
            keys.result()  # raises what loading the keys raised, even when no row needed them

    def _read(
        self,
        task: FileScanTask,
        positions: np.ndarray,
        id_sets: list[tuple[int, ...]],
        loading: Future[list[EqualityKeys]] | None,
    ) -> Iterator[pa.Table]:
        f = task.data_file
        fields, key_names = self._fields(task.residual, id_sets)
        row_filter = (
            None if isinstance(task.residual, AlwaysTrue) else to_arrow_expression(task.residual)
        )
        constants = self._constants(task)
        names = [o.name for o in self._output]
        lineage = {o.field_id: o.name for o in self._output if o.field_id in LINEAGE_IDS}
        eq_keys: list[EqualityKeys] | None = None if loading else []
        io, name = self._table.io, self._table.name
        with open_data_file(io, f.file_path, f.file_format, "data file", name) as data:
            projection = FileProjection(
                data.schema, fields, self._mapping, location=f.file_path, by_name=False
            )
            stats = data.chunk_filter(task.residual, projection.file_fields()) or NoChunkFilter()
            start = 0
            for chunk in range(data.num_chunks):
                raw = _read_chunk(data, chunk, projection.columns, positions, start, stats)
                if isinstance(raw, int):  # skipped unread: its row count
                    start += raw
                    continue
                n = raw.num_rows
                keep = position_mask(positions, start, n)
                start += n
                t = projection.conform(raw, constants)
                if lineage:
                    rows = np.arange(start - n, start, dtype=np.int64)
                    t = fill_lineage(t, lineage, f.first_row_id, task.data_sequence_number, rows)
                if keep is not None:
                    t = t.filter(pa.array(keep))
                if row_filter is not None and t.num_rows:
                    t = t.filter(row_filter)
                if eq_keys is None and t.num_rows:
                    assert loading is not None
                    eq_keys = loading.result()
                for keys in eq_keys or ():
                    if not t.num_rows:
                        break
                    dead = keys.deleted([t.column(key_names[i]) for i in keys.field_ids])
                    if dead.any():
                        t = t.filter(pa.array(np.logical_not(dead)))
                if t.num_rows:
                    yield t.select(names)

    def _fields(
        self, residual: Expression, id_sets: list[tuple[int, ...]]
    ) -> tuple[list[NestedField], dict[int, str]]:
        """Top-level fields to read (output first) and the column name of each key id."""
        fields = list(self._output)
        have = {f.field_id for f in fields}
        for fid in referenced_field_ids(residual):
            top = self._top_level(fid)
            if top.field_id not in have:
                fields.append(top)
                have.add(top.field_id)
        key_names: dict[int, str] = {}
        for ids in id_sets:
            for fid in ids:
                if fid in key_names:
                    continue
                f = self._field_for_id(fid)
                if not any(top.field_id == fid for top in self._schema.fields):
                    if self._schema.has_field(fid):
                        raise UnsupportedError(
                            f"equality deletes on nested field {fid} of table {self._table.name}"
                        )
                    f = NestedField(fid, f"__eq_{fid}", f.field_type)
                if fid not in have:
                    fields.append(f)
                    have.add(fid)
                key_names[fid] = next(x.name for x in fields if x.field_id == fid)
        return fields, key_names

    def _top_level(self, field_id: int) -> NestedField:
        top_name = self._schema.find_column_name(field_id).split(".")[0]
        return self._schema.find_field(top_name)

    def _field_for_id(self, field_id: int) -> NestedField:
        """The field an equality id names: in the scan schema, else the newest schema
        of the table that has it (the column was dropped since)."""
        if self._schema.has_field(field_id):
            return self._schema.find_field(field_id)
        for s in sorted(self._table.metadata.schemas, key=lambda s: -s.schema_id):
            if s.has_field(field_id):
                return s.find_field(field_id)
        raise ValidationError(
            f"equality delete field id {field_id} is in no schema of table {self._table.name}"
        )

    def _constants(self, task: FileScanTask) -> dict[int, object]:
        """Identity partition values by source field id (for columns a file lacks)."""
        f = task.data_file
        try:
            spec = self._table.metadata.spec_by_id(f.spec_id)
        except CorruptMetadataError:
            return {}
        return {
            pf.source_id: f.partition[i]
            for i, pf in enumerate(spec.fields)
            if isinstance(pf.transform, Identity) and i < len(f.partition)
        }


def _read_chunk(
    data: OpenFile,
    chunk: int,
    columns: list[str],
    positions: np.ndarray,
    start: int,
    stats: ChunkFilter,
) -> pa.Table | int:
    """The ``columns`` of ``chunk`` (its first row at position ``start``), or its row
    count when it is skipped unread: every row position-deleted, or no row can match
    by its statistics. A chunk whose row count is known only by reading it is read."""
    n = data.chunk_rows(chunk)
    if n is not None:
        keep = position_mask(positions, start, n)
        if keep is not None and not keep.any():
            return n
        if stats.useful and not stats.might_match(chunk):
            return n
    return data.read_chunk(chunk, columns)
