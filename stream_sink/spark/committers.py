"""The committer of one Iceberg table of a sink (one table, or one of a routed sink's).

Both ``IcebergSink`` and its router build committers here, so a table's commit target,
state directory and checkpoint storage are named the same way wherever it is written:
operator id ``<sink id>`` for one table, ``<sink id>=<table>`` for a routed one.
"""

from __future__ import annotations

from stream_sink.checkpoints import CheckpointStorage
from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.spark.options import SinkOptions
from stream_sink.state import state_dir_for
from stream_sink.table.catalog.base import Catalog
from stream_sink.table.table import Table


def iceberg_committer(
    catalog: Catalog, table: Table, options: SinkOptions, *, operator_id: str, job_id: str
) -> FilesCommitter:
    """A committer (not yet restored) of ``table`` under ``operator_id`` for query
    ``job_id``: state in ``<state_dir>/<operator_id>``, checkpoints under the sink's
    checkpoint location."""
    io = catalog.io_for(options.checkpoint_location)
    return FilesCommitter(
        IcebergTarget(
            table, branch=options.branch, snapshot_properties=options.snapshot_property_map
        ),
        StateDirectory(state_dir_for(options.state_dir, operator_id)),
        CheckpointStorage(options.checkpoint_location, operator_id, io),
        job_id=job_id,
        operator_id=operator_id,
        mode="overwrite" if options.mode == "overwrite" else "append",
    )
