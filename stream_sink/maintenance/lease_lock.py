"""The maintenance lock of a table whose catalog keeps no lock (a REST catalog) and whose
storage may take no side files (a table bucket accepts only metadata and data files): a
log of lease objects in a lock location of the user's choosing, written by put-if-absent
(a conditional PUT on S3, a hard link locally).

The location is the table property ``stream-sink.maintenance.lock-location`` (a
directory every maintainer of the table can write: beside the sink's checkpoints, say),
one sub-directory per table uuid. When the table names none, a sink's in-job
maintenance records ``<its checkpoint location>/<sink id>/maintenance-locks`` as the
property before its first run (``adopt_lock_location``), so the CLI and other sinks
then share that lock. Each state of the lock is a new object
``lease-<seq>.json`` holding ``{"owner", "expires-ms"}`` (owner null: released); the
object with the highest ``seq`` is the lock's state.

Invariants:
- Every change (take, renew, release) creates ``lease-<seq+1>`` from a state ``seq`` it
  read, with put-if-absent: of racers from one state exactly one wins, so at most one
  holder at a time, and an expired lease is taken over without deleting anything a
  racer could have written meanwhile.
- A recorded location is never replaced: ``adopt_lock_location`` writes the property
  only to a table that names none, from a fresh read, and every maintainer then uses
  what the table names (the explicit property is the override).
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
from stream_sink.maintenance.lock import LOCK_LOCATION, MaintenanceLock, _now_ms, uses_lease_log
from stream_sink.table.metadata import TableMetadata
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


LOCKS_DIR = "maintenance-locks"
"""Under a sink's own checkpoint directory: the lock location it records by default."""


def sink_lock_location(checkpoint_location: str, sink_id: str) -> str:
    """The lock location a sink records when the table names none."""
    return f"{checkpoint_location.rstrip('/')}/{sink_id}/{LOCKS_DIR}"


def adopt_lock_location(table: Table, default: str | None) -> Table:
    """``table``, with ``default`` recorded as its lock location when its lock is a lease
    log (``uses_lease_log``) and it names none; ``table`` as it is otherwise.

    ``default`` (a sink's ``sink_lock_location``) is recorded only where a lease log can
    live (put-if-absent: ``s3://`` or local), by a metadata-only commit that changes
    nothing when another maintainer recorded a location first. Without a usable default
    the table is returned unchanged and taking the lock is refused, naming the property.
    """
    from stream_sink.table.metadata_commit import commit_metadata_change

    if default is None or LOCK_LOCATION in table.properties or not uses_lease_log(table):
        return table
    if not FileIO.for_location(default, table.io.properties).supports_put_if_absent:
        return table

    def record(meta: TableMetadata) -> TableMetadata | None:
        if LOCK_LOCATION in meta.properties:
            return None
        return meta.with_properties({LOCK_LOCATION: default})

    commit_metadata_change(table, record)
    where = table.properties.get(LOCK_LOCATION)
    log.info("table %s: maintenance lock location %s=%s", table.name, LOCK_LOCATION, where)
    return table


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
