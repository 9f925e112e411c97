"""The held transactions in the operator state, one version per micro-batch.

Keys: ``transactions/held/<batch id>`` (20-digit zero-padded, so a prefix scan is in
batch order), each value the hold after that batch (:class:`~.held.HeldTransactions`).
Writing the hold after batch ``b`` keeps the newest version below ``b`` and deletes the
older ones, in one atomic write.

Why versions rather than one value: Spark re-runs a batch after a crash with the same
input, and every table that recorded the batch before the crash drops the re-run's
result as a replay while the others record it. The re-run must therefore split exactly
as the first run did: it reads the hold from *before* the batch (:meth:`before`) and the
time the first run decided at (:meth:`decided_at`), never the hold the first run left.
Spark runs batch ``b + 1`` only once ``b`` is acknowledged, so two versions suffice.

The write may stand alone (:meth:`save`) or join another atomic write
(:meth:`write_for`, e.g. a committer's ``pending/<batch>``): either way the hold after
a batch is durable before the batch's committed rows are recorded anywhere.
"""

from __future__ import annotations

from stream_sink.exceptions import CorruptStateError
from stream_sink.state import OperatorStateBackend, StateWriteBatch

from .held import HeldTransactions

HELD_PREFIX = b"transactions/held/"
_WIDTH = 20


def held_key(batch_id: int) -> bytes:
    return HELD_PREFIX + b"%020d" % batch_id


class HoldStore:
    """The versions of the hold in ``state`` (see module)."""

    def __init__(self, state: OperatorStateBackend) -> None:
        self.state = state

    def versions(self) -> list[int]:
        """The batch ids the state holds a version after, ascending."""
        out = []
        for key, _ in self.state.scan(HELD_PREFIX):
            try:
                out.append(int(key[len(HELD_PREFIX) :]))
            except ValueError:
                raise CorruptStateError(
                    f"operator state at {self.state.location}: key {key!r} names no batch"
                ) from None
        return out

    def before(self, batch_id: int) -> HeldTransactions:
        """The hold a batch ``batch_id`` starts from: the newest version below it (empty
        when there is none: the first batch, or nothing was ever held)."""
        below = [b for b in self.versions() if b < batch_id]
        return self._read(below[-1]) if below else HeldTransactions()

    def has_version(self, batch_id: int) -> bool:
        """Whether a run of ``batch_id`` recorded its hold already (this is a re-run)."""
        return self.state.get(held_key(batch_id)) is not None

    def decided_at(self, batch_id: int) -> int | None:
        """The time an earlier run of ``batch_id`` decided its hold at (a replay), else
        None."""
        if not self.has_version(batch_id):
            return None
        return self._read(batch_id).decided_ms

    def latest(self) -> HeldTransactions:
        """The newest version (what is held now, for status and metrics)."""
        versions = self.versions()
        return self._read(versions[-1]) if versions else HeldTransactions()

    def write_for(self, batch_id: int, hold: HeldTransactions) -> StateWriteBatch:
        """The atomic write that records ``hold`` after ``batch_id``: put its version,
        keep the newest below it, delete the rest."""
        write = StateWriteBatch().put(held_key(batch_id), hold.to_bytes())
        below = [b for b in self.versions() if b < batch_id]
        for old in [*below[:-1], *(b for b in self.versions() if b > batch_id)]:
            write.delete(held_key(old))
        return write

    def save(self, batch_id: int, hold: HeldTransactions) -> None:
        self.state.write(self.write_for(batch_id, hold))

    def _read(self, batch_id: int) -> HeldTransactions:
        where = f"operator state at {self.state.location}, held transactions after batch {batch_id}"
        raw = self.state.get(held_key(batch_id))
        if raw is None:
            raise CorruptStateError(f"{where}: vanished")
        return HeldTransactions.from_bytes(raw, where=where)
