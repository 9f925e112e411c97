"""The table users get from ``stream_sink.load_catalog(...).load_table(...)``.

It adds writing and reading to the table-format handle:
``append`` writes Parquet through the same task writers the streaming sink runs on
executors (partitioned tables through the fanout writer) and commits one snapshot;
``scan`` reads, with deletes applied (``stream_sink.read``).

Invariants:
- ``append`` commits exactly one snapshot or nothing; when it fails before the
  commit outcome is known to be a success, it deletes the files it wrote, except
  when the outcome is unknown (the files may now belong to the table).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa

from stream_sink.exceptions import CommitStateUnknownError
from stream_sink.table.snapshots import MAIN_BRANCH, Snapshot
from stream_sink.table.table import Table as _FormatTable
from stream_sink.write.commit import commit_write_result
from stream_sink.write.task_writers import TaskWriterFactory

if TYPE_CHECKING:
    from stream_sink.read.scan import RowFilter, TableScan

ArrowData: TypeAlias = pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.RecordBatch]


class Table(_FormatTable):
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
        writer = TaskWriterFactory.for_table(self).create(partition_id=0, task_id=0)
        try:
            for batch in _batches(data):
                writer.write(batch)
            result = writer.complete()
        except BaseException:
            writer.abort()
            raise
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


def _batches(data: ArrowData) -> Iterable[pa.Table | pa.RecordBatch]:
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return [data]
    return data
