"""The tables a routed sink has written, and among them those it created itself.

Two JSON lists beside the sink's checkpoints, ``<sink id>.tables.json`` (every table
written: their committers are opened, and restored, when the sink opens) and
``<sink id>.created.json`` (the tables the sink created: the only ones, with those
given in ``tables=``, a TRUNCATE may empty; see :mod:`.scope`).

Invariants: each list is replaced atomically and only grows; a table is recorded as
created after it is created, and registered before anything is written to it, so a
crash in between leaves a table owned by no one (never a table owned that the sink did
not create) and never a table written that the sink would not reopen.
"""

from __future__ import annotations

import json

from stream_sink.table.catalog.base import Catalog


class TableRegistry:
    """The tables a routed sink has written, and apart from them those it created
    itself (see module)."""

    def __init__(self, catalog: Catalog, location: str) -> None:
        self._io = catalog.io_for(location)
        self._location = location
        self._created_location = location.removesuffix(".tables.json") + ".created.json"

    def load(self) -> list[str]:
        return self._read(self._location)

    def created(self) -> list[str]:
        return self._read(self._created_location)

    def add(self, name: str) -> None:
        self._add(self._location, name)

    def add_created(self, name: str) -> None:
        self._add(self._created_location, name)

    def _read(self, location: str) -> list[str]:
        if not self._io.exists(location):
            return []
        return [str(t) for t in json.loads(self._io.read_bytes(location))]

    def _add(self, location: str, name: str) -> None:
        names = self._read(location)
        if name not in names:
            self._io.write_atomic(location, json.dumps([*names, name]).encode())
