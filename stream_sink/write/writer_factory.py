"""``TaskWriterFactory``: everything an executor needs to write one table, and the choice
of task writer (:mod:`stream_sink.write.task_writers` without equality fields,
:mod:`stream_sink.write.cdc_writers` with them; partitioned or not).

Kept apart from the writers so that neither writer module imports the other's chooser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stream_sink.io import FileIO
from stream_sink.table.metrics_config import MetricsConfig
from stream_sink.table.partitioning import PartitionSpec
from stream_sink.table.schema import Schema
from stream_sink.write.cdc_writers import PartitionedDeltaWriter, UnpartitionedDeltaWriter
from stream_sink.write.config import WriteConfig
from stream_sink.write.file_factory import OutputFileFactory, new_operation_id
from stream_sink.write.parquet import FileSpec
from stream_sink.write.task_writers import (
    BaseTaskWriter,
    PartitionedFanoutWriter,
    TaskWriter,
    UnpartitionedWriter,
)

if TYPE_CHECKING:
    from stream_sink.table.table import Table


@dataclass(frozen=True)
class TaskWriterFactory:
    """Everything an executor needs to write for one table; frozen and picklable.

    ``operation_id`` names the write (every file name carries it); equality fields
    select the CDC writers, ``upsert`` and the ``cdc_options`` mapping configure them.
    """

    table_name: str
    schema: Schema
    spec: PartitionSpec
    data_location: str
    io: FileIO
    config: WriteConfig = field(default_factory=WriteConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    sort_order_id: int | None = None
    operation_id: str = field(default_factory=new_operation_id)
    equality_field_ids: tuple[int, ...] = ()
    upsert: bool = False
    cdc_options: Mapping[str, Any] = field(default_factory=dict)
    #: the table's format version: 3 makes CDC writers emit deletion vectors
    format_version: int = 2

    @staticmethod
    def for_table(
        table: Table,
        *,
        equality_fields: tuple[str, ...] | list[str] | None = None,
        upsert: bool = False,
        operation_id: str | None = None,
        cdc_options: Mapping[str, Any] | None = None,
    ) -> TaskWriterFactory:
        """A factory for ``table``'s current schema, spec and properties."""
        schema = table.schema()
        sort_order = table.sort_order()
        ids = tuple(schema.find_field(n).field_id for n in equality_fields or ())
        return TaskWriterFactory(
            table_name=table.name,
            schema=schema,
            spec=table.spec().bind(schema),
            data_location=table.data_location,
            io=table.io,
            config=WriteConfig.from_properties(table.properties),
            metrics=MetricsConfig.from_properties(table.properties, schema),
            sort_order_id=sort_order.order_id,
            operation_id=operation_id or new_operation_id(),
            equality_field_ids=ids,
            upsert=upsert,
            cdc_options=dict(cdc_options or {}),
            format_version=table.format_version,
        )

    @property
    def partitioned(self) -> bool:
        return not self.spec.is_unpartitioned

    @property
    def unpartitioned_tuple(self) -> tuple[None, ...]:
        """The partition of every file when the spec is unpartitioned: one null per
        (void) field, as Java records it; ``()`` for a spec without fields."""
        return (None,) * len(self.spec.fields)

    def data_file_spec(self) -> FileSpec:
        return FileSpec(
            schema=self.schema,
            options=self.config.parquet,
            metrics=self.metrics,
            spec_id=self.spec.spec_id,
            sort_order_id=self.sort_order_id,
        )

    def writer_class(self) -> type[BaseTaskWriter]:
        if self.equality_field_ids:
            return PartitionedDeltaWriter if self.partitioned else UnpartitionedDeltaWriter
        return PartitionedFanoutWriter if self.partitioned else UnpartitionedWriter

    def create(self, partition_id: int, task_id: int, attempt_id: int = 0) -> TaskWriter:
        files = OutputFileFactory(
            self.data_location, self.spec, partition_id, task_id, attempt_id, self.operation_id
        )
        return self.writer_class()(self, files)
