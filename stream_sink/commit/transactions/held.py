"""What the sink holds between micro-batches: the change rows of source transactions not
yet complete, what is known of each such transaction, and the ids of those recently
committed; and its bytes (an Arrow IPC stream of the rows beside a JSON header).

Invariants: the rows are in arrival order (earlier batches first, each batch in its own
order), so prepending them to the next batch keeps every key's changes in source order;
the encoding round-trips exactly (schema, values and order); an empty hold has no rows.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.ipc as ipc

from stream_sink.envelope import Envelope
from stream_sink.exceptions import CorruptStateError

from .markers import TransactionMarker

HELD_VALUE = Envelope(b"SSTX", 1, "held transactions value", CorruptStateError)
_LENGTH = struct.Struct(">I")


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction the sink holds: the batch and time (ms) it was first seen, and its
    END when that arrived (it may arrive before all its events)."""

    id: str
    first_batch: int
    first_ms: int
    end: TransactionMarker | None = None


@dataclass(frozen=True)
class HeldTransactions:
    """The hold after ``batch_id`` (-1: before any batch), decided at ``decided_ms``."""

    batch_id: int = -1
    decided_ms: int = 0
    rows: pa.Table | None = None
    open: Mapping[str, OpenTransaction] = field(default_factory=dict)
    completed: tuple[str, ...] = ()
    """Ids of recently committed transactions, oldest first (bounded): their late or
    replayed events are committed at once instead of waiting for an END already used."""

    @property
    def row_count(self) -> int:
        return 0 if self.rows is None else self.rows.num_rows

    def to_bytes(self) -> bytes:
        header = json.dumps(
            {
                "batch_id": self.batch_id,
                "decided_ms": self.decided_ms,
                "open": [_open_json(t) for t in self.open.values()],
                "completed": list(self.completed),
            },
            sort_keys=True,
        ).encode()
        return HELD_VALUE.wrap(_LENGTH.pack(len(header)) + header + _ipc(self.rows))

    @staticmethod
    def from_bytes(raw: bytes, *, where: str) -> HeldTransactions:
        data = HELD_VALUE.payload(raw, where=where)
        try:
            (length,) = _LENGTH.unpack_from(data, 0)
            head = json.loads(data[_LENGTH.size : _LENGTH.size + length])
            body = data[_LENGTH.size + length :]
            rows = ipc.open_stream(pa.py_buffer(body)).read_all() if body else None
            opened = {t["id"]: _open_from(t) for t in head["open"]}
            return HeldTransactions(
                head["batch_id"], head["decided_ms"], rows, opened, tuple(head["completed"])
            )
        except (struct.error, ValueError, KeyError, TypeError, pa.ArrowInvalid) as e:
            raise CorruptStateError(f"{where}: unreadable held transactions ({e})") from e


def _ipc(rows: pa.Table | None) -> bytes:
    if rows is None or rows.num_rows == 0:
        return b""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    return sink.getvalue().to_pybytes()


def _open_json(t: OpenTransaction) -> dict[str, object]:
    end = None if t.end is None else t.end.to_json()
    return {"id": t.id, "first_batch": t.first_batch, "first_ms": t.first_ms, "end": end}


def _open_from(raw: Mapping[str, object]) -> OpenTransaction:
    end = raw["end"]
    marker = None if end is None else TransactionMarker.from_json(end)  # type: ignore[arg-type]
    return OpenTransaction(
        str(raw["id"]),
        int(raw["first_batch"]),  # type: ignore[call-overload]
        int(raw["first_ms"]),  # type: ignore[call-overload]
        marker,
    )
