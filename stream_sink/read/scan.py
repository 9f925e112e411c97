"""Table scans: what users call to read rows.

``TableScan(table, snapshot_id=|ref=|as_of_ms=, row_filter=, columns=)`` reads one
snapshot (the current one by default) with deletes applied.
``IncrementalAppendScan(table, from_snapshot_id, to_snapshot_id)`` reads the rows
appended between two snapshots.

Invariants:
- ``columns`` may name ``_row_id`` and ``_last_updated_sequence_number`` on a v3
  table (row lineage, :mod:`stream_sink.table.row_lineage`); they come after the
  other columns.
- Results have the scan schema's Arrow form (field ids in the metadata); an
  empty table or a scan that matches nothing gives an empty table of that schema.
- The scan schema is the snapshot's schema when a snapshot id, timestamp or tag
  is given, the table's current schema otherwise (a branch head, or no snapshot).
- ``to_batches``/``to_reader`` hold one row group of one file at a time (plus the
  decoded delete files): they read tables larger than memory. ``to_arrow`` reads
  files in parallel and holds the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from stream_sink.exceptions import (
    NoSuchRefError,
    NoSuchSnapshotError,
    ValidationError,
)
from stream_sink.read.binding import bind
from stream_sink.read.expressions import AlwaysTrue, Expression, to_expression
from stream_sink.read.planner import FileScanTask, Planner
from stream_sink.read.task_reader import TaskReader
from stream_sink.read.threads import usable_cpus
from stream_sink.table.row_lineage import LAST_UPDATED_SEQUENCE_NUMBER, LINEAGE_NAMES, ROW_ID
from stream_sink.table.schema import Schema
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot
from stream_sink.table.table import Table
from stream_sink.table.types import NestedField

RowFilter = Expression | str | None


class _Scan:
    """What every scan shares: schema, filter, projection, and reading of tasks."""

    def __init__(
        self, table: Table, schema: Schema, row_filter: RowFilter, columns: Iterable[str] | None
    ) -> None:
        self.table = table
        self.schema = schema
        self.row_filter = bind(to_expression(row_filter), schema, f"table {table.name}")
        columns = None if columns is None or isinstance(columns, str) else list(columns)
        self.lineage = _lineage(table, columns)
        if columns is not None and self.lineage:
            columns = [c for c in columns if c not in LINEAGE_NAMES]
        self.projected_schema = _select(schema, columns, table.name)

    def plan_files(self) -> list[FileScanTask]:
        raise NotImplementedError

    def _reader(self, rows_only: bool = False) -> TaskReader:
        fields = () if rows_only else (*self.projected_schema.fields, *self.lineage)
        return TaskReader(self.table, self.schema, fields)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Record batches, file by file (see module invariants)."""
        reader = self._reader()
        for task in self.plan_files():
            for t in reader.read(task):
                yield from t.to_batches()

    def to_reader(self) -> pa.RecordBatchReader:
        schema = self._reader().output_schema
        return pa.RecordBatchReader.from_batches(schema, self.to_batches())

    def to_arrow(self) -> pa.Table:
        reader = self._reader()
        tasks = self.plan_files()
        if not tasks:
            return reader.output_schema.empty_table()
        if len(tasks) == 1:
            parts = [list(reader.read(tasks[0]))]
        else:
            workers = min(len(tasks), usable_cpus(), 16)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                parts = list(pool.map(lambda task: list(reader.read(task)), tasks))
        tables = [t for part in parts for t in part]
        if not tables:
            return reader.output_schema.empty_table()
        return pa.concat_tables(tables)

    def count(self) -> int:
        """The number of rows the scan returns; from metadata when no file has deletes
        or a residual filter, otherwise by reading only what deletes and filters need."""
        tasks = self.plan_files()
        if all(not t.delete_files and isinstance(t.residual, AlwaysTrue) for t in tasks):
            return sum(t.data_file.record_count for t in tasks)
        reader = self._reader(rows_only=True)
        return sum(part.num_rows for task in tasks for part in reader.read(task))


class TableScan(_Scan):
    """A scan of one snapshot of ``table``; at most one of ``snapshot_id``, ``ref``,
    ``as_of_ms`` (the snapshot current at that time, per the snapshot log)."""

    def __init__(
        self,
        table: Table,
        *,
        snapshot_id: int | None = None,
        ref: str | None = None,
        as_of_ms: int | None = None,
        row_filter: RowFilter = None,
        columns: Iterable[str] | None = None,
    ) -> None:
        given = [
            n
            for n, v in (("snapshot_id", snapshot_id), ("ref", ref), ("as_of_ms", as_of_ms))
            if v is not None
        ]
        if len(given) > 1:
            raise ValidationError(f"scan of table {table.name}: give only one of {given}")
        self.snapshot = _choose_snapshot(table, snapshot_id, ref, as_of_ms)
        schema = _scan_schema(table, self.snapshot, ref) if given else table.metadata.schema
        super().__init__(table, schema, row_filter, columns)

    def plan_files(self) -> list[FileScanTask]:
        return Planner(self.table, self.row_filter).plan(self.snapshot)


class IncrementalAppendScan(_Scan):
    """Rows of the data files added by append snapshots after ``from_snapshot_id``
    (exclusive; None: from the start of history) up to ``to_snapshot_id``
    (inclusive; None: the current snapshot). ``from`` must be an ancestor of ``to``.
    Deletes are not applied: the result is what those appends wrote."""

    def __init__(
        self,
        table: Table,
        from_snapshot_id: int | None,
        to_snapshot_id: int | None = None,
        *,
        row_filter: RowFilter = None,
        columns: Iterable[str] | None = None,
    ) -> None:
        to = (
            _snapshot_by_id(table, to_snapshot_id)
            if to_snapshot_id is not None
            else table.metadata.current_snapshot()
        )
        if from_snapshot_id is not None:
            _snapshot_by_id(table, from_snapshot_id)
        self.snapshots = _range(table, from_snapshot_id, to)
        super().__init__(table, table.metadata.schema, row_filter, columns)

    def plan_files(self) -> list[FileScanTask]:
        return Planner(self.table, self.row_filter).plan_appends(reversed(self.snapshots))


# --- choosing snapshots -------------------------------------------------------------------


def _choose_snapshot(
    table: Table, snapshot_id: int | None, ref: str | None, as_of_ms: int | None
) -> Snapshot | None:
    metadata = table.metadata
    if snapshot_id is not None:
        return _snapshot_by_id(table, snapshot_id)
    if ref is not None:
        try:
            return metadata.snapshot_for_ref(ref)
        except NoSuchRefError:
            raise NoSuchRefError(
                f"table {table.name} has no branch or tag {ref!r}; refs: {sorted(metadata.refs)}"
            ) from None
    if as_of_ms is not None:
        try:
            return metadata.snapshot_as_of(as_of_ms)
        except NoSuchSnapshotError:
            raise NoSuchSnapshotError(
                f"table {table.name} has no snapshot at or before {as_of_ms} ms"
            ) from None
    return metadata.current_snapshot()


def _snapshot_by_id(table: Table, snapshot_id: int) -> Snapshot:
    try:
        return table.metadata.snapshot_by_id(snapshot_id)
    except NoSuchSnapshotError:
        raise NoSuchSnapshotError(f"table {table.name} has no snapshot {snapshot_id}") from None


def _scan_schema(table: Table, snapshot: Snapshot | None, ref: str | None) -> Schema:
    metadata = table.metadata
    if snapshot is None or snapshot.schema_id is None:
        return metadata.schema
    if ref is not None:
        r = metadata.refs.get(ref)
        if ref == MAIN_BRANCH or (r is not None and r.is_branch):
            return metadata.schema
    return metadata.schema_by_id(snapshot.schema_id)


def _range(table: Table, from_id: int | None, to: Snapshot | None) -> list[Snapshot]:
    """Snapshots after ``from_id`` up to ``to``, newest first."""
    out: list[Snapshot] = []
    for snap in table.metadata.ancestors(to.snapshot_id if to else None):
        if snap.snapshot_id == from_id:
            return out
        out.append(snap)
    if from_id is not None:
        raise ValidationError(
            f"table {table.name}: snapshot {from_id} is not an ancestor of "
            f"{to.snapshot_id if to else 'the empty table state'}"
        )
    return out


def _lineage(table: Table, columns: list[str] | None) -> tuple[NestedField, ...]:
    """The row lineage columns asked for (``_row_id``, ``_last_updated_sequence_number``,
    in that order), which only format version 3 tables have."""
    asked = [LINEAGE_NAMES[c] for c in columns or () if c in LINEAGE_NAMES]
    if asked and table.format_version < 3:
        raise ValidationError(
            f"scan of table {table.name}: {[f.name for f in asked]} are row lineage columns "
            f"of format version 3 tables; the table is v{table.format_version}"
        )
    return tuple(f for f in (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER) if f in asked)


def _select(schema: Schema, names: Iterable[str] | None, table: str) -> Schema:
    if names is None:
        return schema
    if isinstance(names, str):
        raise ValidationError(f"scan of table {table}: columns must be a list of names")
    columns = list(names)
    unknown = [c for c in columns if not any(f.name == c for f in schema.fields)]
    if unknown:
        raise ValidationError(
            f"scan of table {table}: unknown columns {unknown}; columns are {schema.column_names}"
        )
    return schema.select(columns)
