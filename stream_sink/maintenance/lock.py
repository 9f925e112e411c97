"""The maintenance lock: at most one maintainer (a sink's in-job maintenance, a
``stream-sink maintain`` run) works on a table at a time.

- SQL catalog: a row per table in ``stream_sink_maintenance_locks`` in the catalog's
  database; taken by INSERT, or by an UPDATE that matches only an expired row.
- Any other catalog (REST) or a table with the property ``stream-sink.maintenance.
  lock-location``: a log of lease objects there, created by put-if-absent
  (``lease_lock``). A sink's in-job maintenance records a location beside its own
  checkpoints as that property when the table names none (``adopt_lock_location``).
- Hadoop (filesystem) catalog: ``<metadata dir>/maintenance.lock`` created
  exclusively (hard link of a complete temp file), holding the owner and the
  lease's expiry. An expired lock file is moved aside under a unique name; the mover
  checks that what it moved is the expired lease it read and puts anything else back.

Invariants:
- A lease expires ``lease_ms`` after it was taken or last renewed; a holder that
  dies without releasing blocks others for at most that long. Long work renews.
- ``release`` and ``renew`` act only on the holder's own lease (by owner token); a
  lease held under the same owner name is taken over at once (a restarted sink
  reclaims the lease its killed predecessor left).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from typing import Any

from stream_sink.exceptions import StreamSinkError
from stream_sink.table.table import Table

log = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 15 * 60 * 1000
LOCK_FILE = "maintenance.lock"
LOCK_TABLE = "stream_sink_maintenance_locks"
LOCK_LOCATION = "stream-sink.maintenance.lock-location"
"""Table property: where a lease log (``lease_lock``) keeps the lock of a table whose
catalog keeps none and whose storage may take no lock file (a REST catalog's table)."""


def uses_lease_log(table: Table) -> bool:
    """Whether ``table``'s lock is a lease log (``lease_lock``): its catalog keeps no
    lock (not SQL) and either its storage takes no lock file (not local) or it names a
    lock location."""
    from stream_sink.table.catalog.sql import SqlCatalog

    if isinstance(table.catalog, SqlCatalog):
        return False
    return table.io.scheme != "file" or LOCK_LOCATION in table.properties


class MaintenanceLockedError(StreamSinkError):
    """Another maintainer holds the table's maintenance lock."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def new_owner(purpose: str) -> str:
    return f"{purpose}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class MaintenanceLock(ABC):
    def __init__(self, table: Table, owner: str, lease_ms: int = DEFAULT_LEASE_MS) -> None:
        self.table = table
        self.owner = owner
        self.lease_ms = lease_ms
        self.held = False

    @staticmethod
    def for_table(
        table: Table,
        purpose: str = "maintenance",
        lease_ms: int = DEFAULT_LEASE_MS,
        *,
        owner: str | None = None,
    ) -> MaintenanceLock:
        """``owner`` None: a unique owner for this process. A stable ``owner`` (a sink's
        id) lets a restarted holder take back its own lease at once instead of waiting
        for a killed predecessor's lease to expire."""
        from stream_sink.table.catalog.sql import SqlCatalog

        owner = owner or new_owner(purpose)
        if isinstance(table.catalog, SqlCatalog):
            return SqlMaintenanceLock(table, owner, lease_ms)
        if uses_lease_log(table):
            from stream_sink.maintenance.lease_lock import LeaseLogLock

            return LeaseLogLock(table, owner, lease_ms)
        return FileMaintenanceLock(table, owner, lease_ms)

    @abstractmethod
    def try_acquire(self) -> bool:
        """Take the lock if free or expired; True when held now."""

    @abstractmethod
    def renew(self) -> bool:
        """Extend the lease; False when it was lost (expired and taken by another)."""

    @abstractmethod
    def release(self) -> None: ...

    @abstractmethod
    def holder(self) -> str | None:
        """The owner of the current unexpired lease, if any."""

    def acquire(self) -> MaintenanceLock:
        if not self.try_acquire():
            raise MaintenanceLockedError(
                f"table {self.table.name}: maintenance is running elsewhere "
                f"(lock held by {self.holder() or 'another maintainer'}); retry later"
            )
        return self

    def __enter__(self) -> MaintenanceLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


class FileMaintenanceLock(MaintenanceLock):
    @property
    def path(self) -> str:
        return self.table.io.path_of(f"{self.table.metadata_dir}/{LOCK_FILE}")

    def _lease(self) -> dict[str, Any] | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
            return doc if isinstance(doc, dict) else {}
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}  # torn or foreign: treated as expired

    def _doc(self) -> bytes:
        return json.dumps({"owner": self.owner, "expires-ms": _now_ms() + self.lease_ms}).encode()

    def try_acquire(self) -> bool:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(self._doc())
            f.flush()
            os.fsync(f.fileno())
        try:
            for _ in range(2):
                try:
                    os.link(tmp, self.path)
                    self.held = True
                    return True
                except FileExistsError:
                    if not self._break_expired():
                        return False
            return False
        finally:
            os.unlink(tmp)

    def _break_expired(self) -> bool:
        """Move an expired lease aside; True when the lock file is gone now."""
        seen = self._lease()
        if seen is None:
            return True
        if int(seen.get("expires-ms", 0)) > _now_ms() and seen.get("owner") != self.owner:
            return False
        aside = f"{self.path}.{uuid.uuid4().hex}.expired"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return True
        try:
            with open(aside, encoding="utf-8") as f:
                moved = json.load(f)
        except (OSError, ValueError):
            moved = {}
        if moved != seen and int(moved.get("expires-ms", 0)) > _now_ms():  # not what we read
            try:  # a fresh lease replaced the expired one meanwhile: put it back
                os.link(aside, self.path)
            except FileExistsError:
                log.warning("table %s: a maintenance lease was displaced", self.table.name)
            os.unlink(aside)
            return False
        os.unlink(aside)
        log.info(
            "table %s: broke an expired maintenance lock of %s", self.table.name, seen.get("owner")
        )
        return True

    def renew(self) -> bool:
        lease = self._lease()
        if not lease or lease.get("owner") != self.owner:
            self.held = False
            return False
        tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(self._doc())
        os.replace(tmp, self.path)
        return True

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        lease = self._lease()
        if lease and lease.get("owner") == self.owner:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def holder(self) -> str | None:
        lease = self._lease()
        if not lease or int(lease.get("expires-ms", 0)) <= _now_ms():
            return None
        return str(lease.get("owner"))


class SqlMaintenanceLock(MaintenanceLock):
    def __init__(self, table: Table, owner: str, lease_ms: int = DEFAULT_LEASE_MS) -> None:
        super().__init__(table, owner, lease_ms)
        from sqlalchemy import BigInteger, Column, MetaData, String
        from sqlalchemy import Table as SqlTable

        self._engine = table.catalog.engine  # type: ignore[attr-defined]
        meta = MetaData()
        self._rows = SqlTable(
            LOCK_TABLE,
            meta,
            Column("catalog_name", String(255), primary_key=True),
            Column("table_identifier", String(1000), primary_key=True),
            Column("owner", String(255), nullable=False),
            Column("expires_ms", BigInteger, nullable=False),
        )
        from sqlalchemy.exc import SQLAlchemyError

        with contextlib.suppress(SQLAlchemyError):  # created by a racing maintainer
            meta.create_all(self._engine, checkfirst=True)
        self._key = (table.catalog.name, table.name)

    def _where(self) -> Any:
        c = self._rows.c
        return (c.catalog_name == self._key[0]) & (c.table_identifier == self._key[1])

    def try_acquire(self) -> bool:
        from sqlalchemy import insert, update
        from sqlalchemy.exc import IntegrityError

        now = _now_ms()
        values = {"owner": self.owner, "expires_ms": now + self.lease_ms}
        try:
            with self._engine.begin() as conn:
                row = {"catalog_name": self._key[0], "table_identifier": self._key[1], **values}
                conn.execute(insert(self._rows).values(**row))
            self.held = True
            return True
        except IntegrityError:
            pass
        with self._engine.begin() as conn:
            taken = conn.execute(
                update(self._rows)
                .where(
                    self._where()
                    & ((self._rows.c.expires_ms <= now) | (self._rows.c.owner == self.owner))
                )
                .values(**values)
            ).rowcount
        self.held = taken == 1
        return self.held

    def renew(self) -> bool:
        from sqlalchemy import update

        with self._engine.begin() as conn:
            n = conn.execute(
                update(self._rows)
                .where(self._where() & (self._rows.c.owner == self.owner))
                .values(expires_ms=_now_ms() + self.lease_ms)
            ).rowcount
        self.held = n == 1
        return self.held

    def release(self) -> None:
        from sqlalchemy import delete

        if not self.held:
            return
        self.held = False
        with self._engine.begin() as conn:
            mine = self._where() & (self._rows.c.owner == self.owner)
            conn.execute(delete(self._rows).where(mine))

    def holder(self) -> str | None:
        from sqlalchemy import select

        with self._engine.connect() as conn:
            row = conn.execute(
                select(self._rows.c.owner, self._rows.c.expires_ms).where(self._where())
            ).first()
        if row is None or int(row[1]) <= _now_ms():
            return None
        return str(row[0])
