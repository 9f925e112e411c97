"""What the executors run: the Spark task functions of each table format.

``iceberg.py`` holds the Iceberg sink's ``WriteTask`` (a TaskWriter over a task's Arrow
batches), ``delta.py`` the Delta Lake tasks (append, copy-on-write rewrite and read,
net-change insert), and ``shared.py`` what a task of either has: its ids and its one
result row of serialized file metadata (rows never return to the driver).
"""
