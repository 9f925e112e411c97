"""The demo's streaming job: Debezium JSON files → ``from_debezium`` → IcebergSink upsert
(or DeltaSink, into a Delta table, when ``delta_path`` is set: the drill's Delta target;
or one routed IcebergSink writing every change to each of ``routed_tables``: the drill's
routed target).

Run as its own process (``python -m stream_sink.demo.job CONFIG_JSON [READY_FILE]``) so
the demo can kill it with SIGKILL and start it again from the same checkpoint location. Locally
and on a cluster it is the same code; only :class:`DemoConfig` differs (catalog URI,
``s3://`` warehouse and checkpoints, Spark master, extra Spark settings).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import stream_sink as ss
from stream_sink.demo.data import KEY, PARTITION_SPEC, ROW_SCHEMA_DDL, TABLE_SCHEMA, ChangeStream
from stream_sink.demo.timing import record_spark_ready
from stream_sink.io import FileIO
from stream_sink.table.catalog import Catalog

TABLE = "demo.orders"
SINK_ID = "demo-orders"
ROUTE_COLUMN = "_table"
"""The routing column of ``routed_tables``: each row's table."""


@dataclass(frozen=True)
class DemoConfig:
    warehouse: str = "warehouse"
    catalog_uri: str | None = None
    """None: a Hadoop catalog under ``warehouse``; else a SQL catalog (sqlite:/postgresql:)."""
    checkpoint_location: str = f"checkpoints/{SINK_ID}"
    state_dir: str = "state"
    input: str = "demo/input"
    log_dir: str = "demo"
    master: str = "local[2]"
    files_per_trigger: int = 1
    mode: str = "upsert"
    """``upsert`` (the demo), ``changelog`` (row kinds as given) or ``append`` (every change
    row's image appended as a plain row)."""
    checkpoint_interval_batches: int = 1
    catalog_properties: Mapping[str, str] = field(default_factory=dict)
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    delta_path: str | None = None
    """None: the Iceberg table ``demo.orders``; else a Delta table at this path, written by
    ``DeltaSink`` (which commits every batch, whatever ``checkpoint_interval_batches``)."""
    catalog_type: str | None = None
    """``rest``: ``catalog_uri`` is a REST catalog's URL (``warehouse`` its warehouse)."""
    table: str = TABLE
    deletes: str = "equality"
    """The sink's ``deletes``: ``equality`` (Iceberg: delete files by key, Flink's; Delta:
    copy-on-write) or ``positions`` (deletion vectors / position deletes resolved at
    commit, both formats)."""
    routed_tables: tuple[str, ...] = ()
    """Empty: the one table ``table``; else every change goes to each of these tables
    (one ``IcebergSink(table_column=ROUTE_COLUMN)``, within their namespaces)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> DemoConfig:
        fields = json.loads(text)
        fields["routed_tables"] = tuple(fields.get("routed_tables", ()))
        return DemoConfig(**fields)


def open_catalog(cfg: DemoConfig) -> Catalog:
    props: dict[str, Any] = dict(cfg.catalog_properties)
    if cfg.catalog_type == "rest":
        return ss.load_catalog(
            "demo", type="rest", uri=cfg.catalog_uri, warehouse=cfg.warehouse, **props
        )
    if cfg.catalog_uri:
        return ss.load_catalog(
            "demo", type="sql", uri=cfg.catalog_uri, warehouse=cfg.warehouse, **props
        )
    return ss.load_catalog("demo", type="hadoop", warehouse=cfg.warehouse, **props)


def create_table(catalog: Catalog, table: str = TABLE) -> None:
    namespace = table.rsplit(".", 1)[0]
    if not catalog.namespace_exists(namespace):
        catalog.create_namespace(namespace)
    catalog.create_table(
        table,
        schema=TABLE_SCHEMA,
        partition_spec=PARTITION_SPEC,
        identifier_fields=list(KEY),
        properties={"write.target-file-size-bytes": str(64 * 1024 * 1024)},
    )


def write_input(cfg: DemoConfig, stream: ChangeStream) -> None:
    """The change stream's files under ``cfg.input``, with increasing modification times
    (Spark's file source takes files in mtime order)."""
    io = FileIO.for_location(cfg.input, cfg.catalog_properties)
    for i, payload in enumerate(stream.files):
        io.write_atomic(f"{cfg.input.rstrip('/')}/changes-{i:05d}.json", payload, fsync=False)
        if io.scheme == "file":
            t = time.time() - 1000 + i
            os.utime(io.path_of(f"{cfg.input.rstrip('/')}/changes-{i:05d}.json"), (t, t))


def run_job(cfg: DemoConfig, ready_file: str | None = None) -> None:
    """Stream every input file into the table (available-now), then stop. With
    ``ready_file``, the moment the Spark session is up is written there (the demo's
    timing: :mod:`stream_sink.demo.timing`)."""
    from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, from_debezium
    from stream_sink.spark.options import to_spark_uri
    from stream_sink.spark.session import local_session

    spark = local_session("stream-sink-demo", master=cfg.master, conf=cfg.spark_conf)
    if ready_file:
        record_spark_ready(ready_file)
    cdc = cfg.mode != "append"
    sink = _sink(cfg, ROW_KIND_COLUMN if cdc else None, ORDER_COLUMN if cdc else None)
    events = spark.readStream.option("maxFilesPerTrigger", cfg.files_per_trigger).text(
        to_spark_uri(cfg.input)
    )
    changes = from_debezium(events, row_schema=ROW_SCHEMA_DDL, order_by="source.lsn")
    if not cdc:
        changes = changes.drop(ROW_KIND_COLUMN, ORDER_COLUMN)
    if cfg.routed_tables:
        names = ", ".join(f"'{t}'" for t in cfg.routed_tables)
        changes = changes.selectExpr("*", f"explode(array({names})) AS {ROUTE_COLUMN}")
    query = (
        changes.writeStream.foreachBatch(sink.foreach_batch)
        .option("checkpointLocation", sink.spark_checkpoint_location)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        sink.close()
        spark.stop()


def _sink(cfg: DemoConfig, row_kind_column: str | None, order_by: str | None) -> Any:
    """The demo's IcebergSink, or its DeltaSink when ``cfg.delta_path`` is set."""
    from stream_sink.spark import DeltaSink, IcebergSink

    if cfg.delta_path:
        return DeltaSink(
            path=cfg.delta_path,
            mode=cfg.mode,
            sink_id=SINK_ID,
            equality_fields=list(KEY) if order_by else None,
            row_kind_column=row_kind_column,
            order_by=order_by,
            checkpoint_location=cfg.checkpoint_location,
            state_dir=cfg.state_dir,
            deletes="positions" if cfg.deletes == "positions" else "copy-on-write",
        )
    # one routed sink writing every change to each routed table, or the one table
    # (hash-distributed by key)
    where: dict[str, Any] = (
        {"table_column": ROUTE_COLUMN, "tables": list(cfg.routed_tables)}
        if cfg.routed_tables
        else {"table": cfg.table, "distribution": "hash"}
    )
    return IcebergSink(
        catalog=open_catalog(cfg),
        mode=cfg.mode,
        sink_id=SINK_ID,
        row_kind_column=row_kind_column,
        order_by=order_by,
        checkpoint_location=cfg.checkpoint_location,
        state_dir=cfg.state_dir,
        checkpoint_interval_batches=cfg.checkpoint_interval_batches,
        deletes=cfg.deletes,
        **where,
    )


def main(argv: list[str]) -> int:
    # the sink's INFO lines (one per commit, one per restore) go to the job's log
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("stream_sink").setLevel(logging.INFO)
    run_job(DemoConfig.from_json(argv[0]), argv[1] if len(argv) > 1 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
