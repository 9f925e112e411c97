"""One stream into many tables: ``IcebergSink(table_column=..., create_tables=True)``.

Split by job, as Iceberg's Flink dynamic sink is:

- ``router.py``: :class:`Router`, the routed destination; walks one batch through the
  modules below.
- ``discovery.py``: one aggregate finds the batch's tables, their columns and keys.
- ``dead_letters.py``: which routing values may not be written, and the dead-letter
  table their rows go to.
- ``truncates.py``: which tables a CDC batch's TRUNCATE rows empty, and which may be.
- ``template.py``: :class:`TableTemplate`, tables created on first sight.
- ``table_updates.py``: each table's schema brought up to the batch, and its plan.
- ``writer.py``: the one Spark job that writes every table.
- ``committers.py``: the per-table committers behind one commit driver, the route log.
- ``registry.py``: the tables the sink has written, and those it created.
- ``scope.py``: the namespaces and tables the operator lets rows name.
- ``maintenance.py``: in-job maintenance per routed table, one table's run at a time.

Invariants (each module states its own): exactly once per table, each under its own
operator id ``<sink id>=<table>`` and watermark; tables absent from a batch are not
touched by it; nothing is created or written before every routing value, column and
truncate of the batch is checked; nothing a row carries is silently dropped.
"""

from stream_sink.spark.foreach_batch.routing.router import Router
from stream_sink.spark.foreach_batch.routing.template import TableTemplate

__all__ = ["Router", "TableTemplate"]
