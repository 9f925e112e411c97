"""Debezium's transaction metadata, read and checked: the ``transaction`` block of a
change event and the BEGIN/END events of the ``<topic.prefix>.transaction`` topic.

With ``provide.transaction.metadata=true`` every change event of a transaction carries
``{"id", "total_order", "data_collection_order"}``; the connector writes a BEGIN event
(``event_count`` and ``data_collections`` null) and an END event (``event_count`` and a
``data_collections`` list of ``{"data_collection", "event_count"}``) per transaction.
Events the connector read outside a transaction (snapshot reads, ``op=r``) carry no
block (null), which is not an error.

Only END decides anything (its per-collection counts say when a transaction is
complete); BEGIN is checked and otherwise unused. Every error names what is wrong,
where (topic, partition, offset when known) and how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from stream_sink.exceptions import TransactionMetadataError

Status = Literal["BEGIN", "END"]

ENABLE = "set provide.transaction.metadata=true on the Debezium connector"

POSTGRES_ID = r"^(\d+):\d+$"
"""Debezium's PostgreSQL connector names a transaction ``<xid>:<lsn>`` with the LSN of
each event's own place (BEGIN, END and every event differ); the xid names the
transaction. Other connectors' ids (MySQL's GTID ``<server uuid>:<n>``, SQL Server's
three hex parts) are whole names and kept as they are."""
_POSTGRES_ID = re.compile(POSTGRES_ID)


def canonical_id(tx: str) -> str:
    """The name of transaction ``tx`` as every event of it carries it (:data:`POSTGRES_ID`)."""
    found = _POSTGRES_ID.match(tx)
    return found.group(1) if found else tx


@dataclass(frozen=True)
class TransactionMarker:
    """A BEGIN or END event. ``collections`` maps each data collection
    (``schema.table``, as Debezium names it) to its event count; empty for BEGIN."""

    status: Status
    id: str
    event_count: int | None = None
    collections: Mapping[str, int] | None = None
    ts_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "id": self.id,
            "event_count": self.event_count,
            "collections": dict(self.collections or {}),
            "ts_ms": self.ts_ms,
        }

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> TransactionMarker:
        return TransactionMarker(
            raw["status"], raw["id"], raw["event_count"], dict(raw["collections"]), raw["ts_ms"]
        )


def where(topic: str | None = None, partition: int | None = None, offset: int | None = None) -> str:
    """``topic t, partition p, offset o`` for what is known of an event's place."""
    parts = [
        f"{name} {value}"
        for name, value in (("topic", topic), ("partition", partition), ("offset", offset))
        if value is not None
    ]
    return ", ".join(parts) or "an event of unknown position"


def transaction_id(block: Mapping[str, Any] | None, at: str) -> str | None:
    """The transaction id of a change event's ``transaction`` block; None without a
    block (an event read outside a transaction, e.g. a snapshot read)."""
    if block is None:
        return None
    tx = block.get("id")
    if not isinstance(tx, str) or not tx:
        raise TransactionMetadataError(
            f"{at}: the change event's transaction block has no id ({dict(block)!r}); "
            f"events of a transaction must name it: {ENABLE}, and do not drop the "
            "transaction field in a transform (SMT)"
        )
    return canonical_id(tx)


def parse_marker(value: Mapping[str, Any], at: str) -> TransactionMarker:
    """A BEGIN/END event of the transaction topic, checked (TransactionMetadataError)."""
    status, tx = value.get("status"), value.get("id")
    if status not in ("BEGIN", "END"):
        raise TransactionMetadataError(
            f"{at}: not a transaction event (status {status!r}, expected BEGIN or END); "
            "subscribe the transaction topic (<topic.prefix>.transaction) as it is"
        )
    if not isinstance(tx, str) or not tx:
        raise TransactionMetadataError(f"{at}: the {status} event has no transaction id")
    tx = canonical_id(tx)
    ts = value.get("ts_ms")
    ts_ms = int(ts) if isinstance(ts, (int, str)) and str(ts).lstrip("-").isdigit() else None
    if status == "BEGIN":
        return TransactionMarker("BEGIN", tx, ts_ms=ts_ms)
    return TransactionMarker("END", tx, _count(value, tx, at), _collections(value, tx, at), ts_ms)


def _count(value: Mapping[str, Any], tx: str, at: str) -> int:
    count = value.get("event_count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TransactionMetadataError(
            f"{at}: the END event of transaction {tx} has no event_count ({count!r}); "
            f"without it the sink cannot tell when the transaction is complete: {ENABLE} "
            "(a Debezium version that writes END events with counts)"
        )
    return count


def _collections(value: Mapping[str, Any], tx: str, at: str) -> dict[str, int]:
    raw = value.get("data_collections")
    if not isinstance(raw, list):
        raise TransactionMetadataError(
            f"{at}: the END event of transaction {tx} has no data_collections ({raw!r}); "
            f"the sink needs each collection's event count: {ENABLE}"
        )
    out: dict[str, int] = {}
    for item in raw:
        name = item.get("data_collection") if isinstance(item, Mapping) else None
        count = item.get("event_count") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not isinstance(count, int) or count < 0:
            raise TransactionMetadataError(
                f"{at}: the END event of transaction {tx} lists {item!r}; each entry of "
                "data_collections needs a data_collection name and an event_count"
            )
        out[name] = out.get(name, 0) + count
    if sum(out.values()) != value["event_count"]:
        raise TransactionMetadataError(
            f"{at}: the END event of transaction {tx} counts {value['event_count']} events "
            f"but its data_collections add up to {sum(out.values())}"
        )
    return out
