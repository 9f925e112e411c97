"""The pipeline under test, shared by the CDC tests and their child-process jobs: Spark's
Kafka source → ``from_debezium`` → a sink's ``foreach_batch``, plus PostgreSQL helpers.

With ``row_schema=None`` each micro-batch's row schema is read from the events' Kafka
Connect schemas (``debezium_row_schema``), so columns added to the source table reach
the sink (whose ``schema_evolution`` adds them)."""

from __future__ import annotations

from typing import Any

from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, debezium_row_schema, from_debezium

ORDER_BY = ("source.lsn",)


def sql(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for s in statements:
            conn.execute(s)


def source_rows(url: str, table: str, columns: str = "*") -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(f"SELECT {columns} FROM {table} ORDER BY pk")]


def kafka_stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def debezium_batches(sink: Any, row_schema: Any = None) -> Any:
    """A ``foreachBatch`` function: the batch's Debezium events as changes into ``sink``."""
    last: list[Any] = [row_schema]

    def apply(batch: Any, batch_id: int) -> None:
        rows = row_schema or debezium_row_schema(batch) or last[0]
        if rows is None:  # nothing but tombstones before any event: nothing to apply
            return
        last[0] = rows
        changes = from_debezium(batch, row_schema=rows, order_by=ORDER_BY)
        sink.foreach_batch(changes, batch_id)

    return apply


def start(df: Any, sink: Any, row_schema: Any = None, processing_time: str | None = None) -> Any:
    """Start the query (availableNow unless ``processing_time`` is given)."""
    writer = df.writeStream.foreachBatch(debezium_batches(sink, row_schema)).option(
        "checkpointLocation", sink.spark_checkpoint_location
    )
    if processing_time:
        writer = writer.trigger(processingTime=processing_time)
    else:
        writer = writer.trigger(availableNow=True)
    return writer.start()


SINK_OPTIONS = {"mode": "upsert", "row_kind_column": ROW_KIND_COLUMN, "order_by": ORDER_COLUMN}
