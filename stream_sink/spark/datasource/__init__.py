"""The ``format("stream_sink")`` front door: Spark's Python Data Source (pyspark >= 4.0).

:mod:`.register` adds the format to a session; :mod:`.adapter` holds the classes Spark
calls; the Iceberg route plans and commits in :mod:`.options`, :mod:`.write` (executors)
and :mod:`.commit` (driver), the Delta route in :mod:`.delta`. Each commit opens the
sink's runtime (:mod:`stream_sink.spark.runtime`, as ``IcebergSink`` and ``DeltaSink``
do) and hands the micro-batch to the commit driver, which runs the protocol.

Nothing is imported here: ``pyspark.sql.datasource`` exists only from pyspark 4.0, and
executors import the writing side only.
"""
