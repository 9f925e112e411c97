"""``format("stream_sink")`` into a Delta table (``.option("target", "delta")``): options
(:mod:`.options`), the executors' task (:mod:`.write`), the driver's commit (:mod:`.commit`)."""
