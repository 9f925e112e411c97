"""Operations: restart/recovery drills (``stream-sink drill``) and metrics for Prometheus.

``metrics`` and ``metrics_export`` import nothing of Spark and may be used by the Spark
adapter; the drill runs streaming jobs in child processes and imports no Spark itself.
"""
