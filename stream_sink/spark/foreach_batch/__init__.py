"""The ``foreachBatch`` front doors: ``IcebergSink`` (:mod:`.iceberg`; one table, or many
through :mod:`.routing`), ``DeltaSink`` (:mod:`.delta`).

Each turns Spark's call ``foreach_batch(df, batch_id)`` into a write job on the
executors and then into the commit driver's calls
(:class:`~stream_sink.commit.driver.CommitDriver`): none calls a committer's protocol
step itself. Helpers here serve these sinks only: Spark's own Parquet writer route
(:mod:`.parquet_route`, :mod:`.file_columns`), the one-task CDC job
(:mod:`.single_task`), Delta's copy-on-write file search (:mod:`.copy_on_write`), the
batches Spark ran that never reached a sink (:mod:`.batch_gaps`). ``IcebergSink`` picks
its destination once (:mod:`.destination`): :class:`~.one_table.OneTable`, or the
:class:`~.routing.Router`, whose package holds everything routed (the namespaces and
tables it may write, maintenance per routed table among them).
"""
