"""What executors need to read a planned scan, and what each Spark task of it runs.

The driver plans a scan, packs its file scan tasks into splits and ships them as rows
(one split per row, one row per Spark partition); :class:`ReadSplits`, the function
handed to ``mapInArrow``, reads the splits of its partition with a TaskReader.

Invariants:
- Executors never touch the catalog: a :class:`ReadContext` carries the file IO
  configuration, the scan and projected schemas, and the table metadata trimmed to its
  schemas and partition specs (what TaskReader resolves field ids and partition
  constants with). Snapshots are left behind: their size grows with table history.
- Split payloads hold data and delete files without column metrics (readers never
  use them once planning is done), so a split stays small whatever the column count.
- Output batches have exactly the Arrow schema Spark expects (``target``).
- A file that cannot be read fails the task with an error naming the file and table
  (MissingFileError for a missing file, CorruptionError for undecodable bytes).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import pyarrow as pa

from stream_sink.exceptions import CorruptionError, InvalidOptionError, StreamSinkError
from stream_sink.io.fileio import FileIO
from stream_sink.read.planner import FileScanTask
from stream_sink.read.task_reader import TaskReader
from stream_sink.spark.read.types import to_spark_batch
from stream_sink.table.manifest import DataFile
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.schema import Schema
from stream_sink.table.table import Table
from stream_sink.table.types import NestedField

if TYPE_CHECKING:
    from stream_sink.table.catalog.base import Catalog

SPLIT_COLUMN = "split"
TASKS_COLUMN = "tasks"
SPLIT_DDL = f"{SPLIT_COLUMN} int, {TASKS_COLUMN} binary"

SPLIT_SIZE_PROPERTY = "read.split.target-size"
OPEN_FILE_COST_PROPERTY = "read.split.open-file-cost"
DEFAULT_SPLIT_SIZE = 128 * 1024 * 1024
DEFAULT_OPEN_FILE_COST = 4 * 1024 * 1024


@dataclass(frozen=True)
class ReadContext:
    """Everything a TaskReader needs on an executor, for one scan; picklable."""

    identifier: tuple[str, ...]
    metadata_location: str
    metadata: TableMetadata
    io: FileIO
    schema: Schema
    output: tuple[NestedField, ...]
    target: pa.Schema

    @staticmethod
    def of(
        table: Table, schema: Schema, output: Sequence[NestedField], target: pa.Schema
    ) -> ReadContext:
        """The context of a scan of ``table`` with ``schema`` into ``output`` fields,
        yielding batches of Arrow schema ``target``."""
        trimmed = dataclasses.replace(
            table.metadata,
            snapshots=(),
            snapshot_log=(),
            metadata_log=(),
            refs={},
            current_snapshot_id=None,
        )
        return ReadContext(
            tuple(table.identifier),
            table.metadata_location,
            trimmed,
            table.io,
            schema,
            tuple(output),
            target,
        )

    @property
    def table_name(self) -> str:
        return ".".join(self.identifier)

    def reader(self) -> TaskReader:
        """A TaskReader over a table handle without a catalog: it reads, never commits."""
        detached = Table(
            self.identifier,
            self.metadata,
            self.metadata_location,
            self.io,
            cast("Catalog[Table]", None),
        )
        return TaskReader(detached, self.schema, self.output)


@dataclass(frozen=True)
class ReadSplits:
    """``mapInArrow`` function: read every split of the partition, yield Spark batches."""

    context: ReadContext

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader = self.context.reader()
        for batch in batches:
            for payload in batch.column(TASKS_COLUMN).to_pylist():
                for task in decode_split(payload):
                    yield from self._read(reader, task)

    def _read(self, reader: TaskReader, task: FileScanTask) -> Iterator[pa.RecordBatch]:
        ctx = self.context
        try:
            for part in reader.read(task):
                yield from to_spark_batch(part, ctx.output, ctx.target).to_batches()
        except StreamSinkError:
            raise
        except pa.ArrowInvalid as e:
            raise CorruptionError(
                f"cannot read data file {task.file_path} of table {ctx.table_name} "
                f"(or one of its {len(task.delete_files)} delete files): {e}"
            ) from e


# --- splits ------------------------------------------------------------------------------


def encode_split(tasks: Sequence[FileScanTask]) -> bytes:
    """One split's tasks as bytes for a row; column metrics are dropped (see module doc)."""
    slim = [
        dataclasses.replace(
            t, data_file=_slim(t.data_file), delete_files=[_slim(d) for d in t.delete_files]
        )
        for t in tasks
    ]
    return pickle.dumps(slim, protocol=pickle.HIGHEST_PROTOCOL)


def decode_split(payload: bytes) -> list[FileScanTask]:
    return cast(list[FileScanTask], pickle.loads(payload))


def _slim(f: DataFile) -> DataFile:
    return dataclasses.replace(
        f,
        column_sizes=None,
        value_counts=None,
        null_value_counts=None,
        nan_value_counts=None,
        lower_bounds=None,
        upper_bounds=None,
    )


def task_weight(task: FileScanTask, open_file_cost: int) -> int:
    """Bytes a task reads, at least ``open_file_cost`` (opening a file is not free)."""
    size = task.data_file.file_size_in_bytes + sum(d.file_size_in_bytes for d in task.delete_files)
    return max(size, open_file_cost)


def pack_splits(
    tasks: Iterable[FileScanTask], split_size: int, open_file_cost: int
) -> list[list[FileScanTask]]:
    """Consecutive tasks grouped while a group's weight stays within ``split_size``;
    a task heavier than that is a split of its own. Plan order is kept, so the files
    of one partition tend to share a split."""
    splits: list[list[FileScanTask]] = []
    weight = 0
    for task in tasks:
        w = task_weight(task, open_file_cost)
        if splits and weight + w <= split_size:
            splits[-1].append(task)
            weight += w
        else:
            splits.append([task])
            weight = w
    return splits


def adaptive_split_size(
    tasks: Sequence[FileScanTask], parallelism: int, split_size: int, open_file_cost: int
) -> int:
    """``split_size``, made smaller so that a small scan still spreads over about
    ``parallelism`` splits (never below the cost of opening one file)."""
    total = sum(task_weight(t, open_file_cost) for t in tasks)
    spread = -(-total // max(1, parallelism))
    return min(split_size, max(spread, open_file_cost))


def size_property(properties: Mapping[str, str], key: str, default: int, table: str) -> int:
    """A positive byte count from table properties."""
    raw = properties.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise InvalidOptionError(f"table {table}: {key} must be a positive byte count, got {raw!r}")
    return value
