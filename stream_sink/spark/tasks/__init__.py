"""What the executors run: the Spark task functions of each table format.

``iceberg.py`` holds the Iceberg sink's ``WriteTask`` (a TaskWriter over a task's Arrow
batches) and the result column every task of either format yields; ``delta.py`` holds the
Delta Lake tasks (append, copy-on-write rewrite and read, net-change insert). Every task
yields one row, its serialized file metadata; rows never return to the driver.
"""
