"""Reading tables into Spark: ``read_table`` plans on the driver (:mod:`.dataframe`),
executors read each split (:mod:`.tasks`) into Spark's types (:mod:`.types`).

A front door of its own: imports neither ``foreach_batch/`` nor ``datasource/``.
"""
