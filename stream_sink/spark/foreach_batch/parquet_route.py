"""The ``spark`` write route: Spark's own Parquet writer writes a batch's data files
(append and overwrite modes); Python only reads their footers for the metrics.

Per batch: the DataFrame (already distributed) is cut to the table's columns with
their field ids (:mod:`.file_columns`), partition values become extra columns that
Spark partitions the files by (so the source columns stay inside the files), and
``DataFrame.write.parquet`` writes them into a directory of the table's data location
that is new for every batch attempt: ``<data>/<operation id>/[__ss_pN=value/]part-….parquet``
(the operation id carries the query, the batch and a uuid). The driver then lists that
directory and builds each file's DataFile from its footer (:mod:`stream_sink.write.written_file`).

Invariants:
- Files land only under the batch attempt's own directory: a replayed batch writes a
  new directory (the files of an attempt that never reached the committer are orphans,
  never table rows), and Spark's output committer (always its algorithm 1, whatever
  the cluster's default) keeps a failed task attempt's files out of it. Nothing else
  about the commit protocol changes: the WriteResult goes to the committer exactly as
  the pyarrow route's does.
- Session settings the files depend on (INT64 microsecond timestamps, field ids,
  proleptic Gregorian dates; Spark reads them from the session only, never from write
  options) hold in a private clone of the session the write runs in
  (:mod:`stream_sink.spark.private_session`): the caller's session and its other queries never see
  them. Codec, its level and the row-group and page sizes travel as per-write options.
- Files without rows (Spark writes one for an empty batch) are deleted, not committed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stream_sink.io.credentials import is_vended
from stream_sink.spark.errors import reraise_stream_sink_error
from stream_sink.spark.foreach_batch.file_columns import (
    PARTITION_PREFIX,
    PartitionColumn,
    file_columns,
    partition_columns,
    partition_value,
    unsupported,
)
from stream_sink.spark.private_session import with_settings
from stream_sink.table.types import DateType, TimestampType, TimestamptzType
from stream_sink.write.result import WriteResult
from stream_sink.write.written_file import describe_file

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from stream_sink.write.writer_factory import TaskWriterFactory

log = logging.getLogger(__name__)

ROUTES = ("auto", "spark", "arrow")
"""``write_route``: ``auto`` picks ``spark`` where it can write the table (see
:func:`choose_route`), ``spark`` insists on it, ``arrow`` always writes with pyarrow."""
_CODECS = {"none": "uncompressed", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd"}
_LOCAL_SCHEMES = ("", "file")


def choose_route(requested: str, mode: str, factory: TaskWriterFactory) -> tuple[str, str]:
    """(route, why) for a batch of ``mode``; ``spark`` only where it writes the same files.

    Measured on 2 cores (bench/bench_vs_iceberg_spark.py): Spark's writer is faster for
    append and overwrite; CDC modes (delete files, key index) always take pyarrow."""
    if requested == "arrow" or mode not in ("append", "overwrite"):
        return "arrow", f"write_route={requested}, mode={mode}"
    reason = spark_unsupported(factory) or _vended_credentials(factory)
    if reason is None and requested == "auto":
        scheme = factory.data_location.split("://", 1)[0] if "://" in factory.data_location else ""
        if scheme not in _LOCAL_SCHEMES:
            reason = f"data location {factory.data_location} is not a local path"
    if reason is None:
        return "spark", "Spark's Parquet writer can write this table"
    return "arrow", reason


def _vended_credentials(factory: TaskWriterFactory) -> str | None:
    """Why Spark's writer must not write files that take a catalog's vended credentials:
    s3a would write them with the session's own keys (its options are cached per
    FileSystem, so a batch cannot hand it the table's set), where the table's FileIO
    uses, and renews, the vended ones."""
    io = factory.io
    if io.credentials is None and not is_vended(io.properties):
        return None
    return (
        "the catalog vends this table's storage credentials, which Spark's s3a writer "
        "would not use (it writes with the session's own keys)"
    )


def spark_unsupported(factory: TaskWriterFactory) -> str | None:
    """Why Spark's writer cannot write this table's data files (None: it can)."""
    reason = unsupported(factory.schema, factory.spec)
    if reason:
        return reason
    p = factory.config.parquet
    if p.codec not in _CODECS:
        return f"codec {p.codec}"
    if p.codec_level is not None and p.codec != "zstd":
        return f"a compression level for {p.codec}"
    if factory.config.invalid_utf8 != "fail":
        return f"write.invalid-utf8={factory.config.invalid_utf8}"
    return None


@dataclass(frozen=True)
class Projection:
    """The columns Spark writes for one table schema, spec and set of data columns.

    Built once and reused for every batch of that shape: each column expression is a
    call into the JVM, and a batch should not pay for them again."""

    columns: tuple[Any, ...]
    parts: tuple[PartitionColumn | None, ...]

    @staticmethod
    def build(factory: TaskWriterFactory, present: Sequence[str], where: str) -> Projection:
        parts = tuple(partition_columns(factory.spec, factory.schema))
        named = [p.column.alias(p.name) for p in parts if p is not None]
        return Projection((*file_columns(factory.schema, present, where), *named), parts)

    @property
    def partition_names(self) -> list[str]:
        return [p.name for p in self.parts if p is not None]


def rows_per_file(summary: Mapping[str, str], target_bytes: int) -> int | None:
    """Rows that fill a data file of ``target_bytes``, estimated from a snapshot
    ``summary`` (its files' bytes per record); None when the table has no rows yet.

    Spark's writer cannot cut files by size, only by rows (``maxRecordsPerFile``); the
    estimate errs small when the table also holds delete files (their bytes count, their
    rows do not), so a file stays near or below the target rather than above it."""
    try:
        records = int(summary.get("total-records", "0"))
        size = int(summary.get("total-files-size", "0"))
    except ValueError:
        return None
    if records <= 0 or size <= 0:
        return None
    return max(1, target_bytes * records // size)


def write_batch(
    df: DataFrame,
    factory: TaskWriterFactory,
    where: str,
    projection: Projection | None = None,
    max_rows_per_file: int | None = None,
) -> WriteResult:
    """Write ``df`` (the batch, distributed, with the table's columns) as data files of
    ``factory``'s table in a new directory; their DataFiles (see module doc).
    ``projection``: built for ``df``'s columns and ``factory``'s schema and spec (built
    here when None). ``max_rows_per_file``: where Spark starts a task's next file (see
    :func:`rows_per_file`; None: one file per task and partition)."""
    if projection is None:
        projection = Projection.build(factory, df.columns, where)
    out = with_settings(df.select(*projection.columns), _needed_settings(factory))
    directory = f"{factory.data_location}/{factory.operation_id}"
    options = _write_options(factory)
    if max_rows_per_file is not None:
        options["maxRecordsPerFile"] = str(max_rows_per_file)
    writer = out.write.mode("append").options(**options)
    if projection.partition_names:
        writer = writer.partitionBy(*projection.partition_names)
    try:
        writer.parquet(directory)
    except Exception as e:
        reraise_stream_sink_error(e)
        raise
    return _describe(factory, directory, list(projection.parts))


def _write_options(factory: TaskWriterFactory) -> dict[str, str]:
    p = factory.config.parquet
    options = {
        "compression": _CODECS[p.codec],
        "parquet.block.size": str(p.row_group_bytes),
        "parquet.page.size": str(p.page_bytes),
        "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        # Algorithm 1 publishes a task's files only at job commit; with 2 (a cluster's
        # default may say so) a task attempt that fails after its task commit leaves
        # files the directory listing would take for the batch's rows.
        "mapreduce.fileoutputcommitter.algorithm.version": "1",
    }
    if p.codec_level is not None:
        options["parquet.compression.codec.zstd.level"] = str(p.codec_level)
    if p.dict_page_bytes is not None:
        options["parquet.dictionary.page.size"] = str(p.dict_page_bytes)
    return options


def _needed_settings(factory: TaskWriterFactory) -> dict[str, str]:
    settings = {"spark.sql.parquet.fieldId.write.enabled": "true"}
    types = {type(f.field_type) for f in factory.schema.leaf_fields()}
    if TimestamptzType in types:
        settings["spark.sql.parquet.outputTimestampType"] = "TIMESTAMP_MICROS"
    if types & {DateType, TimestamptzType, TimestampType}:
        settings["spark.sql.parquet.datetimeRebaseModeInWrite"] = "CORRECTED"
    return settings


def _describe(
    factory: TaskWriterFactory, directory: str, parts: list[PartitionColumn | None]
) -> WriteResult:
    io = factory.io
    file_spec = factory.data_file_spec()
    files = []
    for relative in _parquet_files(factory, directory):
        dirs = dict(seg.split("=", 1) for seg in relative.split("/")[:-1] if "=" in seg)
        partition = tuple(
            partition_value(p, dirs.get(p.name) if p is not None else None) for p in parts
        )
        location = f"{directory}/{relative}"
        data_file = describe_file(io, location, file_spec, partition)
        if data_file.record_count == 0:
            io.delete(location)
            continue
        files.append(data_file)
    return WriteResult(tuple(files))


def _parquet_files(factory: TaskWriterFactory, directory: str) -> list[str]:
    """Paths (relative to ``directory``) of the Parquet files Spark committed there."""
    out = []
    for listed in factory.io.walk(directory):
        segments = listed.relative.split("/")
        if any(s.startswith(("_", ".")) for s in segments if not s.startswith(PARTITION_PREFIX)):
            continue  # committer leftovers, checksums
        if listed.relative.endswith(".parquet"):
            out.append(listed.relative)
    return sorted(out)
