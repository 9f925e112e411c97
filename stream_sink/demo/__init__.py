"""The demo pipeline as a library: a deterministic Debezium change stream of an ``orders``
table (:mod:`.data`) and the streaming job that upserts it (:mod:`.job`).

Used by the ``stream-sink demo`` command (``cli/``) and by the drills (``ops/``); imports
Spark only inside :func:`stream_sink.demo.job.run_job`.
"""
