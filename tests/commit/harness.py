"""A harness that drives a FilesCommitter the way the streaming driver does, without Spark.

It feeds WriteResults, takes checkpoints (snapshot_state + complete_checkpoint), notifies,
"crashes" (drops the committer without any cleanup; only the state handle is released,
as the OS would at process death) and restarts (restore). Files are written by the real
TaskWriters; equality delete files are written here with pyarrow.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from readers import duckdb_connection

from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory, committed_watermark
from stream_sink.table.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntryStatus,
    read_manifest,
    read_manifest_list,
)
from stream_sink.table.operations import branch_head
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
Row = tuple[int, str]
STAGING_NAME = re.compile(r"^.+-\d+-\d+-[0-9a-f]{8}-\d{5}\.avro$")


# --- files ---------------------------------------------------------------------------------


def write_rows(table: Table, rows: Sequence[Row], spec: PartitionSpec | None = None) -> WriteResult:
    """Data files holding ``rows``, written by the real task writers (``spec``: an older
    partition spec of the table to write with)."""
    factory = TaskWriterFactory.for_table(table)
    if spec is not None:
        factory = TaskWriterFactory(
            table_name=factory.table_name,
            schema=factory.schema,
            spec=spec.bind(factory.schema),
            data_location=factory.data_location,
            io=factory.io,
        )
    writer = factory.create(0, 0)
    writer.write(arrow_rows(rows))
    return writer.complete()


def arrow_rows(rows: Sequence[Row]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "data": [r[1] for r in rows]}, schema=SCHEMA)


def write_eq_deletes(table: Table, ids: Sequence[int], name: str | None = None) -> DataFile:
    """An equality delete file (key ``id``) for ``ids``, unpartitioned."""
    field_id = table.schema().find_field("id").field_id
    schema = pa.schema(
        [
            pa.field(
                "id",
                pa.int64(),
                nullable=False,
                metadata={b"PARQUET:field_id": str(field_id).encode()},
            )
        ]
    )
    path = f"{table.data_location}/{name or os.urandom(8).hex()}-eq-deletes.parquet"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"id": list(ids)}, schema=schema), path)
    return DataFile(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        spec_id=table.spec().spec_id,
        partition=(),
        record_count=len(ids),
        file_size_in_bytes=os.path.getsize(path),
        equality_ids=(field_id,),
    )


def upsert_result(table: Table, rows: Sequence[Row], deleted: Iterable[int] = ()) -> WriteResult:
    """What an upsert batch writes: the new rows, and one equality delete per key it
    touches (``rows``' keys and ``deleted``)."""
    data = write_rows(table, rows) if rows else WriteResult()
    keys = sorted({r[0] for r in rows} | set(deleted))
    deletes = (write_eq_deletes(table, keys),) if keys else ()
    return WriteResult(data.data_files, deletes, ())


# --- reading the table ---------------------------------------------------------------------


_duckdb: list[Any] = []


def duckdb_read(metadata_location: str, columns: str = "id, data") -> list[tuple[Any, ...]]:
    """Rows at ``metadata_location`` read by DuckDB's iceberg extension (one connection
    per test process: loading the extensions costs about a second)."""
    if not _duckdb:
        _duckdb.append(duckdb_connection())
    loc = metadata_location.replace("'", "''")
    return list(_duckdb[0].execute(f"SELECT {columns} FROM iceberg_scan('{loc}')").fetchall())


def table_rows(table: Table) -> list[Row]:
    """The rows of main as DuckDB's iceberg extension reads them, sorted."""
    table.refresh()
    if table.current_snapshot() is None:
        return []
    return sorted((r[0], r[1]) for r in duckdb_read(table.metadata_location))


def live_files(table: Table, ref: str = "main") -> list[DataFile]:
    """Live data and delete files of ``ref``'s head (a path may repeat if the table is bad)."""
    meta = table.refresh().metadata
    head = branch_head(meta, ref)
    if head is None:
        return []
    out = []
    for m in read_manifest_list(table.io, head.manifest_list):
        spec = meta.spec_by_id(m.partition_spec_id)
        for e in read_manifest(table.io, m, spec.partition_type(meta.schema)):
            if e.status != ManifestEntryStatus.DELETED:
                out.append(e.data_file)
    return out


def branch_rows(table: Table, ref: str) -> list[Row]:
    """Rows of ``ref`` for tables without delete files (read straight from Parquet)."""
    rows: list[Row] = []
    for f in live_files(table, ref):
        assert f.content == DataFileContent.DATA, "branch_rows reads data-only tables"
        t = pq.read_table(f.file_path)
        rows.extend(zip(t["id"].to_pylist(), t["data"].to_pylist(), strict=True))
    return sorted(rows)


def snapshot_count(table: Table) -> int:
    return len(table.refresh().snapshots())


def watermark(table: Table, job_id: str, operator_id: str, branch: str = "main") -> int:
    return committed_watermark(table.refresh().metadata, job_id, operator_id, branch)


def latest_summary(table: Table, branch: str = "main") -> Mapping[str, str]:
    head = branch_head(table.refresh().metadata, branch)
    assert head is not None
    return head.summary


def staging_manifests(table: Table, location: str | None = None) -> list[str]:
    """Staging manifests left in the table's metadata directory (or ``location``)."""
    where = location or table.metadata_dir
    if not os.path.isdir(where):
        return []
    return sorted(n for n in os.listdir(where) if STAGING_NAME.match(n))


# --- the harness ---------------------------------------------------------------------------


class Harness:
    """One sink (operator) writing one table; restartable."""

    def __init__(
        self,
        root: Path,
        table: Table,
        backend: str,
        *,
        job_id: str,
        operator_id: str = "sink",
        **options: Any,
    ) -> None:
        self.root = root
        self.table = table
        self.backend = backend
        self.job_id = job_id
        self.operator_id = operator_id
        self.options = options
        self.state_dir = str(root / "state" / operator_id)
        self.storage = CheckpointStorage(str(root / "checkpoints"), operator_id)
        self.committer: FilesCommitter | None = None

    def open(
        self,
        job_id: str | None = None,
        acknowledged: Iterable[int] | None = None,
        had_input: Callable[[int], bool] | None = None,
    ) -> FilesCommitter:
        if job_id is not None:
            self.job_id = job_id
        kind: Literal["rocksdb", "memory"] = "rocksdb" if self.backend == "rocksdb" else "memory"
        options = dict(self.options)
        target = IcebergTarget(
            self.table.catalog.load_table(self.table.identifier),
            branch=options.pop("branch", "main"),
            snapshot_properties=options.pop("snapshot_properties", None),
            deletes=options.pop("deletes", "equality"),
        )
        self.committer = FilesCommitter(
            target,
            StateDirectory(self.state_dir, kind=kind, sync=False),
            self.storage,
            job_id=self.job_id,
            operator_id=self.operator_id,
            **options,
        )
        self.committer.restore(acknowledged, had_input)
        return self.committer

    @property
    def c(self) -> FilesCommitter:
        assert self.committer is not None, "open() first"
        return self.committer

    def process(self, batch_id: int, result: WriteResult) -> bool:
        return self.c.process(batch_id, result)

    def checkpoint(self, checkpoint_id: int) -> None:
        """snapshot_state + complete_checkpoint (Flink harness' ``snapshot``)."""
        self.c.snapshot_state(checkpoint_id)
        self.c.complete_checkpoint(checkpoint_id)

    def notify(self, checkpoint_id: int) -> None:
        self.c.notify_checkpoint_complete(checkpoint_id)

    def step(self, batch_id: int, result: WriteResult) -> None:
        """One batch with its own checkpoint, committed."""
        self.process(batch_id, result)
        self.checkpoint(batch_id)
        self.notify(batch_id)

    def crash(self) -> None:
        """Drop the committer with no cleanup; only the state handle goes (as at exit)."""
        if self.committer is not None:
            self.committer.state.close()
            self.committer = None

    def close(self) -> None:
        if self.committer is not None:
            self.committer.close()
            self.committer = None

    def watermark(self, job_id: str | None = None) -> int:
        return watermark(
            self.table, job_id or self.job_id, self.operator_id, self.options.get("branch", "main")
        )

    def staging_manifests(self) -> list[str]:
        return staging_manifests(self.table)


def change_table(table: Table, change: Any) -> Table:
    """Commit ``change(metadata) -> metadata`` (a property or spec update) to the table."""
    table.refresh()
    table.catalog.commit(table.identifier, table.metadata_location, change(table.metadata))
    return table.refresh()


def set_properties(table: Table, **props: str) -> Table:
    return change_table(table, lambda m: m.with_properties(props))
