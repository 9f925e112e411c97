"""Parquet encoding choices shared by the Iceberg and the Delta writers.

A low floor: imports nothing of a table format, so ``write/`` (Iceberg) and ``delta/``
both use it.
"""
