"""One source transaction, one commit: the change rows of a Debezium transaction are held
on the driver until the micro-batch that completes it (its END seen, every collection's
events counted), durable in the operator state across restarts, and bounded.

- ``markers.py``: the transaction block and BEGIN/END events, read and checked;
- ``split.py``: one batch split into what commits now and what is held (pure);
- ``held.py``: what is held between batches, and its bytes;
- ``bound.py``: how long a transaction may be held, and the WARNING when it is not;
- ``store.py``: the hold's versions in the operator state;
- ``buffer.py``: the per-batch steps on the driver, in the order exactly once needs.
"""
