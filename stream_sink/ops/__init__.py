"""Operations: restart/recovery drills (``stream-sink drill``).

The drill runs streaming jobs in child processes and imports no Spark itself; the sink's
metrics and their Prometheus export live in :mod:`stream_sink.metrics`.
"""
