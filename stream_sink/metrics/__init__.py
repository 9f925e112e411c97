"""Operational metrics: the committer's and the writers' counters, and their Prometheus
export (registry of sinks, exposition text, HTTP endpoint).

A low floor: imports nothing of Spark, of a table format or of the commit protocol, so
``commit/``, ``spark/`` and ``ops/`` all report through it. (Parquet column statistics,
which Iceberg also calls "metrics", are ``write/column_stats.py``.)
"""
