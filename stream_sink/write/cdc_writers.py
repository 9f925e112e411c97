"""CDC task writers (Flink's UnpartitionedDeltaWriter / PartitionedDeltaWriter).

A batch holds the table's columns plus a row kind column (``+I``, ``-U``, ``+U``,
``-D``; name from ``cdc_options["row_kind_column"]``, default ``_row_kind``).
What each row does is decided per batch in :mod:`stream_sink.write.change_plan`.

Invariants:
- Per partition there is one data file sequence, one equality delete file sequence
  and one set of position deletes, plus the index from each key to the position of its
  live row written by this writer (across all batches until ``complete``; a NumPy
  hash table, about 29 bytes per live integer key at most, see
  :mod:`stream_sink.lookup.key_index`). A key in that map is deleted by position, any
  other by equality (Iceberg #15305: an equality delete never applies to data of the same commit).
- Input is checked before anything is written: row kind column present, equality
  columns present and non-null, known row kinds, the rest matching the table. Every
  error names the column and, for values, the row's position in the batch; after it
  (and after any failure) the writer has already deleted every file it wrote.
- On a v3 table the position deletes become deletion vectors (one Puffin file per
  partition, one vector per data file of this writer; they only ever reference files
  this writer wrote, so no earlier vector needs merging); every other key's delete is
  an equality delete, as in Flink, whether the table holds the key or not (the writer
  reads no table: the first batch into an empty table writes them too).
- Partitioned writers route a row by its own values; in upsert mode every partition
  source column must be an equality field, so a key's deletes land in the partition
  of its rows. Partitions stay open until ``complete`` (as in Flink); their unwritten
  row groups together stay under ``write.fanout.max-buffered-bytes``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from stream_sink.exceptions import InvalidOptionError
from stream_sink.lookup.key_index import KeyIndex
from stream_sink.lookup.key_values import dense_key_ids
from stream_sink.table.transforms import Void
from stream_sink.table.types import PrimitiveType
from stream_sink.write.change_plan import (
    DEFAULT_ROW_KIND_COLUMN,
    OP_SKIP,
    check_no_null_keys,
    decode_row_kinds,
    link_keys,
    ops_for,
    plan_changes,
    require_columns,
)
from stream_sink.write.deletes import PositionDeletes, equality_delete_spec, position_delete_spec
from stream_sink.write.file_factory import OutputFileFactory
from stream_sink.write.grouping import group_by_partition
from stream_sink.write.parquet import FileSpec
from stream_sink.write.result import WriteResult
from stream_sink.write.rolling import RollingFileWriter
from stream_sink.write.task_writers import BaseTaskWriter

if TYPE_CHECKING:
    from stream_sink.write.writer_factory import TaskWriterFactory

ROW_KIND_COLUMN_OPTION = "row_kind_column"
_KNOWN_OPTIONS = frozenset({ROW_KIND_COLUMN_OPTION})
_NO_POSITIONS = np.empty(0, dtype=np.int64)


@dataclass(frozen=True)
class DeltaSettings:
    """What a CDC writer needs beyond the factory, validated once."""

    where: str
    row_kind_column: str
    key_names: tuple[str, ...]
    upsert: bool
    data: FileSpec
    equality: FileSpec
    position: FileSpec

    @staticmethod
    def of(factory: TaskWriterFactory) -> DeltaSettings:
        where = f"table {factory.table_name}"
        row_kind = _row_kind_column(factory.cdc_options, where)
        schema = factory.schema
        if row_kind in schema.column_names:
            raise InvalidOptionError(
                f"{where}: row kind column {row_kind!r} is also a table column; name another one"
            )
        keys = _key_names(factory, where)
        config = factory.config
        return DeltaSettings(
            where=where,
            row_kind_column=row_kind,
            key_names=keys,
            upsert=factory.upsert,
            data=factory.data_file_spec(),
            equality=equality_delete_spec(
                schema,
                factory.equality_field_ids,
                factory.upsert,
                config.parquet,
                factory.metrics,
                factory.spec.spec_id,
            ),
            position=position_delete_spec(config.parquet, factory.spec.spec_id),
        )


def _row_kind_column(options: Mapping[str, Any], where: str) -> str:
    unknown = sorted(set(options) - _KNOWN_OPTIONS)
    if unknown:
        raise InvalidOptionError(
            f"{where}: unknown delta writer options {unknown}; known: {sorted(_KNOWN_OPTIONS)}"
        )
    name = options.get(ROW_KIND_COLUMN_OPTION) or DEFAULT_ROW_KIND_COLUMN
    if not isinstance(name, str):
        raise InvalidOptionError(f"{where}: {ROW_KIND_COLUMN_OPTION} must be a column name")
    return name


def _key_names(factory: TaskWriterFactory, where: str) -> tuple[str, ...]:
    """Names of the equality fields: top-level primitive columns of the table."""
    schema = factory.schema
    top = {f.field_id: f for f in schema.fields}
    names = []
    for fid in factory.equality_field_ids:
        f = top.get(fid)
        if f is None or not isinstance(f.field_type, PrimitiveType):
            what = schema.find_column_name(fid) if schema.has_field(fid) else f"id {fid}"
            raise InvalidOptionError(
                f"{where}: equality field {what!r} must be a top-level primitive column"
            )
        names.append(f.name)
    if factory.upsert and factory.partitioned:
        for pf in factory.spec.fields:
            keyed = pf.source_id in factory.equality_field_ids
            if not keyed and not isinstance(pf.transform, Void):
                raise InvalidOptionError(
                    f"{where}: in upsert mode the partition source column "
                    f"{schema.find_column_name(pf.source_id)!r} (of partition field "
                    f"{pf.name!r}) must be an equality field; equality fields: {names}"
                )
    return tuple(names)


class _PartitionDelta:
    """The files of one partition and the positions of its live keys."""

    def __init__(self, owner: BaseDeltaWriter, partition: tuple[Any, ...]) -> None:
        s, config = owner.settings, owner.factory.config
        self._owner, self._settings, self._partition = owner, s, partition
        self._data = owner.new_rolling_writer(s.data, config.target_file_bytes, partition)
        self._equality = owner.new_rolling_writer(
            s.equality, config.delete_target_file_bytes, partition, suffix="eq-deletes"
        )
        self._positions = PositionDeletes()
        self._live = KeyIndex(owner.key_hash_bits)

    @property
    def buffered_bytes(self) -> int:
        return self._data.buffered_bytes + self._equality.buffered_bytes

    def flush(self) -> None:
        self._data.flush()
        self._equality.flush()

    def write(self, data: pa.Table, ops: np.ndarray) -> None:
        """Apply the changes ``data`` (no skipped rows; ``ops`` per row) in order."""
        keys = [data.column(n) for n in self._settings.key_names]
        links = link_keys(*dense_key_ids(keys))
        probe = self._live.find(keys, links.firsts)  # each key of the batch probed once
        known = np.full(len(ops), -1, dtype=np.int64)
        known[links.firsts] = self._live.positions(probe)
        plan = plan_changes(ops, links, known, self._settings.upsert)
        positions = self._insert(data, plan.inserts)
        self._positions.delete(
            np.concatenate([plan.deleted_known, positions[plan.deleted_inserts]])
        )
        self._delete_equal(data, plan.equality_deletes)
        self._live.settle(keys, probe, _final_positions(plan.final_inserts, positions))

    def _insert(self, data: pa.Table, rows: np.ndarray) -> np.ndarray:
        if not len(rows):
            return _NO_POSITIONS
        if len(rows) == data.num_rows:
            part = data
        elif 2 * len(rows) > data.num_rows:  # a filter copies most rows faster than a take
            keep = np.zeros(data.num_rows, dtype=bool)
            keep[rows] = True
            part = data.filter(pa.array(keep))
        else:
            part = data.take(rows)
        return self._positions.positions_of(self._data.write(part))

    def _delete_equal(self, data: pa.Table, rows: np.ndarray) -> None:
        if not len(rows):
            return
        if self._settings.upsert:
            data = data.select(list(self._settings.key_names))
        self._equality.write(data.take(rows))

    def complete(self) -> WriteResult:
        self._live.clear()
        data = self._data.complete()
        equality = self._equality.complete()
        if self._owner.factory.format_version >= 3:
            positions = self._positions.write_vectors(
                self._new_puffin_location,
                self._owner.factory.io,
                self._settings.position.spec_id,
                self._partition,
            )
        else:
            positions = self._positions.write(self._open_position_writer)
        return WriteResult(
            data_files=tuple(data),
            delete_files=(*equality, *positions.files),
            referenced_data_files=positions.referenced_data_files,
        )

    def _new_puffin_location(self) -> str:
        return self._owner.new_owned_location(self._partition, "dv", "puffin")

    def _open_position_writer(self) -> RollingFileWriter:
        return self._owner.new_rolling_writer(
            self._settings.position,
            self._owner.factory.config.delete_target_file_bytes,
            self._partition,
            suffix="pos-deletes",
        )


def _final_positions(final_inserts: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Per key of the batch: the position of its final insert, -1 when it ends deleted."""
    final = np.full(len(final_inserts), -1, dtype=np.int64)
    live = final_inserts >= 0
    final[live] = positions[final_inserts[live]]
    return final


class BaseDeltaWriter(BaseTaskWriter):
    """Input decoding and checks shared by both CDC writers."""

    #: Width of hashed key fingerprints (see lookup/key_index.py); narrowed only by tests.
    key_hash_bits = 64

    def __init__(self, factory: TaskWriterFactory, files: OutputFileFactory) -> None:
        super().__init__(factory, files)
        self.settings = DeltaSettings.of(factory)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._guarded(self._write, batch)

    def _write(self, batch: pa.RecordBatch | pa.Table) -> None:
        data, ops = self._decode(batch)
        if data.num_rows:
            self._route(data, ops)

    def _decode(self, batch: pa.RecordBatch | pa.Table) -> tuple[pa.Table, np.ndarray]:
        """The table rows to apply (ignored ``-U`` of upsert mode dropped) and their ops."""
        s = self.settings
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        require_columns(table, [s.row_kind_column], "row kind", s.where)
        require_columns(table, s.key_names, "equality field", s.where)
        kinds = decode_row_kinds(table.column(s.row_kind_column), s.row_kind_column, s.where)
        check_no_null_keys(table, s.key_names, s.where)
        data = self.conform(table.drop_columns([s.row_kind_column]))
        ops = ops_for(kinds, s.upsert)
        keep = ops != OP_SKIP
        if not keep.all():
            data, ops = data.filter(pa.array(keep)), ops[keep]
        return data, ops

    def _route(self, data: pa.Table, ops: np.ndarray) -> None:
        raise NotImplementedError

    def _partitions(self) -> Iterable[_PartitionDelta]:
        raise NotImplementedError

    def complete(self) -> WriteResult:
        def finish() -> WriteResult:
            return WriteResult.merge([p.complete() for p in self._partitions()])

        return self._guarded(finish)  # type: ignore[no-any-return]


class UnpartitionedDeltaWriter(BaseDeltaWriter):
    def __init__(self, factory: TaskWriterFactory, files: OutputFileFactory) -> None:
        super().__init__(factory, files)
        self._delta = _PartitionDelta(self, factory.unpartitioned_tuple)

    def _route(self, data: pa.Table, ops: np.ndarray) -> None:
        self._delta.write(data, ops)

    def _partitions(self) -> Iterable[_PartitionDelta]:
        return [self._delta]


class PartitionedDeltaWriter(BaseDeltaWriter):
    def __init__(self, factory: TaskWriterFactory, files: OutputFileFactory) -> None:
        super().__init__(factory, files)
        self._deltas: dict[tuple[Any, ...], _PartitionDelta] = {}

    def _route(self, data: pa.Table, ops: np.ndarray) -> None:
        f = self.factory
        for group in group_by_partition(data, f.spec, f.schema):
            delta = self._deltas.get(group.partition)
            if delta is None:
                delta = self._deltas[group.partition] = _PartitionDelta(self, group.partition)
            rows = ops if group.indices is None else ops[group.indices.to_numpy()]
            delta.write(group.rows_of(data), rows)
        self.bound_memory(self._deltas.values())

    def _partitions(self) -> Iterable[_PartitionDelta]:
        return list(self._deltas.values())
