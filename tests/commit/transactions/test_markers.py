"""Tests stream_sink.commit.transactions.markers: Debezium's BEGIN/END events and the
transaction block, read and refused with what, where and how to fix."""

from __future__ import annotations

import pytest

from stream_sink.commit.transactions.markers import (
    TransactionMarker,
    canonical_id,
    parse_marker,
    transaction_id,
    where,
)
from stream_sink.exceptions import TransactionMetadataError

AT = where("pg.transaction", 0, 17)
END = {
    "status": "END",
    "id": "571:53736280",
    "event_count": 3,
    "data_collections": [
        {"data_collection": "public.orders", "event_count": 1},
        {"data_collection": "public.lines", "event_count": 2},
    ],
    "ts_ms": 1580390884335,
}


def test_an_end_event_gives_its_counts_per_collection() -> None:
    marker = parse_marker(END, AT)
    assert marker == TransactionMarker(
        "END", "571", 3, {"public.orders": 1, "public.lines": 2}, 1580390884335
    )
    assert TransactionMarker.from_json(marker.to_json()) == marker


def test_a_begin_event_needs_only_its_id() -> None:
    begin = {"status": "BEGIN", "id": "571:53736280", "event_count": None, "data_collections": None}
    assert parse_marker(begin, AT) == TransactionMarker("BEGIN", "571")


def test_a_transaction_is_named_as_every_event_of_it_names_it() -> None:
    """Debezium's PostgreSQL ids are ``<xid>:<lsn>`` with each event's own LSN (seen from
    Debezium 3.6.1: BEGIN ``732:26606496``, END ``732:26609936``, events ``732:<their
    lsn>``): the xid names the transaction. Other connectors' ids are kept whole."""
    assert canonical_id("732:26606496") == canonical_id("732:26609936") == "732"
    gtid = "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"  # MySQL: one server uuid for all
    assert canonical_id(gtid) == gtid
    assert canonical_id("00000025:00000d08:0025") == "00000025:00000d08:0025"  # SQL Server
    assert canonical_id("tx-7") == "tx-7"
    assert transaction_id({"id": "732:26607000"}, AT) == "732"


def test_where_names_what_is_known() -> None:
    assert AT == "topic pg.transaction, partition 0, offset 17"
    assert where() == "an event of unknown position"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"status": "COMMIT"}, "not a transaction event"),
        ({"id": None}, "has no transaction id"),
        ({"event_count": None}, "has no event_count.*provide.transaction.metadata=true"),
        ({"data_collections": None}, "has no data_collections"),
        ({"data_collections": [{"data_collection": "public.orders"}]}, "each entry"),
        ({"event_count": 4}, "add up to 3"),
    ],
)
def test_bad_events_are_refused_naming_their_place(change: dict, message: str) -> None:
    with pytest.raises(TransactionMetadataError, match=message) as e:
        parse_marker({**END, **change}, AT)
    assert "offset 17" in str(e.value)


def test_the_transaction_block() -> None:
    assert transaction_id(None, AT) is None  # a snapshot read
    assert transaction_id({"id": "571:1", "total_order": 1}, AT) == "571"
    with pytest.raises(TransactionMetadataError, match=r"offset 17.*no id.*provide\.transaction"):
        transaction_id({"total_order": 1}, AT)
