"""``IcebergTable``: the table users get from ``stream_sink.load_catalog(...).load_table(...)``;
``StaticTable``: the read-only one ``stream_sink.load_static_table(...)`` opens from a
metadata file.

It adds writing and reading of Arrow data to the format-level handle
(:class:`stream_sink.table.table.Table`: metadata, catalog, commit operations):
``append`` writes Parquet through the same task writers the streaming sink runs on
executors (partitioned tables through the fanout writer) and commits one snapshot;
``upsert`` writes through the sink's CDC writers in upsert mode (equality deletes
by key, then the rows) and commits one row delta;
``scan`` reads, with deletes applied (``stream_sink.read``).

Invariants:
- ``append`` and ``upsert`` commit exactly one snapshot or nothing; when they fail
  before the commit outcome is known to be a success, they delete the files they
  wrote, except when the outcome is unknown (the files may now belong to the table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias

import pyarrow as pa

from stream_sink.exceptions import CommitStateUnknownError, ReadOnlyTableError, ValidationError
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot
from stream_sink.table.table import Table
from stream_sink.write.change_plan import DEFAULT_ROW_KIND_COLUMN
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.task_writers import write_through
from stream_sink.write.writer_factory import TaskWriterFactory

if TYPE_CHECKING:
    from stream_sink.maintenance import Maintenance
    from stream_sink.read.scan import RowFilter, TableScan

ArrowData: TypeAlias = pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.RecordBatch]


class IcebergTable(Table):
    """A format-level Iceberg table handle with Arrow ``append`` and ``scan``."""

    def append(
        self,
        data: ArrowData,
        *,
        snapshot_properties: Mapping[str, str] | None = None,
        branch: str = MAIN_BRANCH,
    ) -> Snapshot:
        """Write ``data`` as new data files and commit them as one append snapshot.

        Columns are matched by name; a missing optional column is written as nulls; a
        name, type or nullability mismatch raises SchemaMismatchError naming the column.
        """
        factory = TaskWriterFactory.for_table(self)
        return self._write_and_commit(factory, _batches(data), snapshot_properties, branch)

    def upsert(
        self,
        data: ArrowData,
        equality_fields: Iterable[str] | None = None,
        *,
        snapshot_properties: Mapping[str, str] | None = None,
        branch: str = MAIN_BRANCH,
    ) -> Snapshot:
        """Insert ``data`` or replace the rows with the same key, as one row-delta
        snapshot (merge-on-read): an equality delete per key, then the rows.

        ``equality_fields``: the key columns (default: the schema's identifier fields).
        Within ``data`` a later row of a key replaces an earlier one (position delete),
        as in the sink's upsert mode. On a partitioned table every partition source
        column must be a key column.
        """
        keys = list(equality_fields or self.schema().identifier_field_names)
        if not keys:
            raise ValidationError(
                f"upsert into {self.name} needs key columns: pass equality_fields or set "
                "the schema's identifier fields"
            )
        factory = TaskWriterFactory.for_table(self, equality_fields=keys, upsert=True)
        rows = (_with_row_kind(b, "+I") for b in _batches(data))
        return self._write_and_commit(factory, rows, snapshot_properties, branch)

    def _write_and_commit(
        self,
        factory: TaskWriterFactory,
        batches: Iterable[pa.Table | pa.RecordBatch],
        snapshot_properties: Mapping[str, str] | None,
        branch: str,
    ) -> Snapshot:
        writer = factory.create(partition_id=0, task_id=0)
        result = write_through(writer, batches)
        try:
            return commit_write_result(
                self, result, snapshot_properties=snapshot_properties, branch=branch
            )
        except CommitStateUnknownError:
            raise
        except BaseException:
            writer.abort()
            raise

    def scan(
        self,
        snapshot_id: int | None = None,
        ref: str | None = None,
        as_of_ms: int | None = None,
        row_filter: RowFilter = None,
        columns: Iterable[str] | None = None,
    ) -> TableScan:
        """A scan of one snapshot (default: the current one), deletes applied;
        ``.to_arrow()`` reads it. See ``stream_sink.read.scan.TableScan``."""
        from stream_sink.read.scan import TableScan

        return TableScan(
            self,
            snapshot_id=snapshot_id,
            ref=ref,
            as_of_ms=as_of_ms,
            row_filter=row_filter,
            columns=columns,
        )

    @property
    def maintenance(self) -> Maintenance:
        """Compaction, delete conversion, expiry, orphan cleanup (``stream_sink.maintenance``)."""
        from stream_sink.maintenance import Maintenance

        return Maintenance(self)


def _batches(data: ArrowData) -> Iterable[pa.Table | pa.RecordBatch]:
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return [data]
    return data


def _with_row_kind(batch: pa.Table | pa.RecordBatch, kind: str) -> pa.Table:
    table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
    kinds = pa.array([kind] * table.num_rows, type=pa.string())
    return table.append_column(DEFAULT_ROW_KIND_COLUMN, kinds)


class StaticTable(IcebergTable):
    """An Iceberg table opened from one metadata file (``load_static_table``): it scans as
    any table does, and refuses every write before writing anything (ReadOnlyTableError,
    naming the file and how to open the table for writing)."""

    def _refuse(self, what: str) -> NoReturn:
        refuse = getattr(self.catalog, "refuse", None)
        if refuse is None:  # a handle copied onto another catalog: no longer read-only
            raise ReadOnlyTableError(f"cannot {what}: table {self.name} is read-only")
        raise refuse(f"{what} table {self.name}")

    def append(self, data: ArrowData, **kwargs: Any) -> Snapshot:
        self._refuse("append to")

    def upsert(self, data: ArrowData, *args: Any, **kwargs: Any) -> Snapshot:
        self._refuse("upsert into")

    @property
    def maintenance(self) -> Maintenance:
        self._refuse("run maintenance on")

    def update_schema(self, **kwargs: Any) -> Any:
        self._refuse("change the schema of")

    def update_spec(self) -> Any:
        self._refuse("change the partitioning of")

    def upgrade_format_version(self, version: int) -> Table:
        self._refuse("upgrade")

    def new_fast_append(self, branch: str = MAIN_BRANCH) -> Any:
        self._refuse("append to")

    def new_append(self, branch: str = MAIN_BRANCH) -> Any:
        self._refuse("append to")

    def new_row_delta(self, branch: str = MAIN_BRANCH) -> Any:
        self._refuse("commit a row delta to")

    def new_replace_partitions(self, branch: str = MAIN_BRANCH) -> Any:
        self._refuse("replace partitions of")

    def new_overwrite(self, branch: str = MAIN_BRANCH) -> Any:
        self._refuse("overwrite")

    def new_rewrite(self, branch: str = MAIN_BRANCH) -> Any:
        self._refuse("rewrite files of")

    def new_expire_snapshots(self) -> Any:
        self._refuse("expire snapshots of")

    def new_rewrite_manifests(self, branch: str = MAIN_BRANCH) -> Any:
        self._refuse("rewrite manifests of")
