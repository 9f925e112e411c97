"""The maintenance lock of a table whose catalog keeps no lock (a REST catalog) and whose
storage may take no side files (a table bucket accepts only metadata and data files): a
log of lease objects in a lock location of the user's choosing, written by put-if-absent
(a conditional PUT on S3, a hard link locally).

The location is the table property ``stream-sink.maintenance.lock-location`` (a
directory every maintainer of the table can write: beside the sink's checkpoints, say),
one sub-directory per table uuid. Each state of the lock is a new object
``lease-<seq>.json`` holding ``{"owner", "expires-ms"}`` (owner null: released); the
object with the highest ``seq`` is the lock's state.

Invariants:
- Every change (take, renew, release) creates ``lease-<seq+1>`` from a state ``seq`` it
  read, with put-if-absent: of racers from one state exactly one wins, so at most one
  holder at a time, and an expired lease is taken over without deleting anything a
  racer could have written meanwhile.
- Only the holder renews or releases; a lease under the same owner is taken back at
  once (a restarted sink). Objects two states behind the newest are removed by the
  next winner (best effort: a leftover is harmless).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from typing import Any

from stream_sink.exceptions import StreamSinkError, UnsupportedError
from stream_sink.io.fileio import FileIO
from stream_sink.maintenance.lock import LOCK_LOCATION, MaintenanceLock, _now_ms
from stream_sink.table.table import Table

log = logging.getLogger(__name__)

_LEASE = re.compile(r"lease-(\d{12})\.json$")


def lock_directory(table: Table) -> str:
    """Where ``table``'s lease log lives; an error naming the property when unset."""
    base = table.properties.get(LOCK_LOCATION, "").rstrip("/")
    if not base:
        raise UnsupportedError(
            f"table {table.name}: its catalog {table.catalog.name!r} keeps no maintenance "
            f"lock and its storage ({table.location}) may take no lock file; set the table "
            f"property {LOCK_LOCATION} to a directory every maintainer can write (s3:// or "
            "local, e.g. beside the sink's checkpoints), e.g. create_table(..., "
            f"properties={{{LOCK_LOCATION!r}: 's3://bucket/locks'}}) or Spark SQL's ALTER "
            "TABLE ... SET TBLPROPERTIES"
        )
    return f"{base}/{table.metadata.table_uuid}"


class LeaseLogLock(MaintenanceLock):
    """See the module docstring."""

    def __init__(self, table: Table, owner: str, lease_ms: int) -> None:
        super().__init__(table, owner, lease_ms)
        self.directory = lock_directory(table)
        # vended credentials are the table's (often scoped to its files, and short-lived):
        # the lock directory, elsewhere, is reached with the catalog's own storage keys
        vended = table.io.credentials is not None
        store = table.catalog.properties if vended else table.io.properties
        self.io = FileIO.for_location(self.directory, store)
        if not self.io.supports_put_if_absent:
            raise UnsupportedError(
                f"table {table.name}: {LOCK_LOCATION}={self.directory} is on a store without "
                "put-if-absent; use an s3:// or local directory"
            )

    def _latest(self) -> tuple[int, dict[str, Any]]:
        seqs = [
            int(m.group(1))
            for loc in self.io.list_dir(self.directory)
            if (m := _LEASE.search(loc)) is not None
        ]
        if not seqs:
            return 0, {}
        seq = max(seqs)
        try:
            doc = json.loads(self.io.read_bytes(self._location(seq)))
        except (ValueError, StreamSinkError):
            doc = {}  # torn or foreign: treated as released
        return seq, doc if isinstance(doc, dict) else {}

    def _location(self, seq: int) -> str:
        return f"{self.directory}/lease-{seq:012d}.json"

    def _put(self, seq: int, owner: str | None) -> bool:
        expires = _now_ms() + self.lease_ms if owner else 0
        doc = json.dumps({"owner": owner, "expires-ms": expires, "seq": seq}).encode()
        won = self.io.put_if_absent(self._location(seq), doc)
        if won:
            for old in range(max(1, seq - 4), seq - 1):
                with contextlib.suppress(StreamSinkError, OSError):
                    self.io.delete(self._location(old))
        return won

    @staticmethod
    def _live(doc: dict[str, Any]) -> bool:
        return bool(doc.get("owner")) and int(doc.get("expires-ms", 0)) > _now_ms()

    def try_acquire(self) -> bool:
        seq, doc = self._latest()
        if self._live(doc) and doc.get("owner") != self.owner:
            return False
        if doc.get("owner") and doc.get("owner") != self.owner:
            log.info("table %s: took over the expired lease of %s", self.table.name, doc["owner"])
        self.held = self._put(seq + 1, self.owner)
        return self.held

    def renew(self) -> bool:
        seq, doc = self._latest()
        self.held = doc.get("owner") == self.owner and self._put(seq + 1, self.owner)
        return self.held

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        seq, doc = self._latest()
        if doc.get("owner") == self.owner:
            self._put(seq + 1, None)

    def holder(self) -> str | None:
        _, doc = self._latest()
        return str(doc["owner"]) if self._live(doc) else None
