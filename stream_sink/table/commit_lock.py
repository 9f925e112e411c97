"""One lock per table location for the commit attempts of this process.

Every commit attempt (refresh, validate, write manifests, swap) of the operations,
expiry and metadata-only changes holds the lock of its table's location. Two
committers in one process, such as a streaming sink and the maintenance it runs in a
background thread, then never race each other's compare-and-swap: each attempt builds
on the other's commit instead of losing to it and starting over. Committers in other
processes race through the catalog's compare-and-swap: the loser refreshes and retries.

Invariants: the lock is re-entrant (a commit inside an attempt's hook on the same
thread does not deadlock); it is held for one attempt, never across retries' waits;
one lock per location for the life of the process.
"""

from __future__ import annotations

import threading

_LOCKS: dict[str, threading.RLock] = {}
_GUARD = threading.Lock()


def commit_lock(table_location: str) -> threading.RLock:
    """The lock of ``table_location`` (the table's ``location``), created on first use."""
    key = table_location.rstrip("/")
    with _GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = threading.RLock()
        return lock
