"""The connector's template (``docker/cdc/debezium-postgres.properties``) keeps its
replication slot up with the WAL while its table is quiet and other tables are written:
PostgreSQL can remove that WAL."""

from __future__ import annotations

import time

import pytest
from cdc_stack import Connect, Stack
from debezium_pipeline import sql

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # real JVMs

BUSY_MB = 30
"""WAL the other table's writes make (about), far above what the slot may keep."""
KEPT_MB = 1


def _kept_bytes(cdc_stack: Stack, slot: str) -> int:
    """WAL written since the slot's confirmed position (what PostgreSQL must keep)."""
    with cdc_stack.postgres.connect() as conn:
        row = conn.execute(
            "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (slot,),
        ).fetchone()
    assert row is not None, f"no replication slot {slot}"
    return int(row[0])


def test_a_quiet_tables_slot_keeps_no_wal_of_other_tables(cdc_stack: Stack) -> None:
    url = cdc_stack.postgres.url
    sql(
        url,
        "CREATE TABLE slot_quiet (pk bigint PRIMARY KEY, v text)",
        "INSERT INTO slot_quiet VALUES (1, 'a')",
        "CREATE TABLE slot_busy (pk bigserial PRIMARY KEY, v text)",
    )
    connect = Connect(
        cdc_stack.directory / "connect-slot",
        cdc_stack.kafka.jars,
        cdc_stack.kafka,
        cdc_stack.postgres,
        tables="public.slot_quiet",
        topic_prefix="slot",
        name="slot",
    )
    slot = connect.connector_values()["SLOT_NAME"]
    assert isinstance(slot, str)
    try:
        connect.start()
        rows = BUSY_MB * 1024 * 1024 // 300  # a row takes about 300 bytes of WAL
        sql(
            url,
            f"INSERT INTO slot_busy (v) SELECT repeat('x', 200) FROM generate_series(1, {rows})",
        )
        assert _kept_bytes(cdc_stack, slot) > BUSY_MB // 2 * 1024 * 1024
        deadline = time.monotonic() + 90  # heartbeats every 10 s, offsets stored every 1 s
        kept = [_kept_bytes(cdc_stack, slot)]
        while kept[-1] >= KEPT_MB * 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(2)
            kept.append(_kept_bytes(cdc_stack, slot))
        assert kept[-1] < KEPT_MB * 1024 * 1024, f"the slot keeps WAL (bytes, every 2 s): {kept}"
    finally:
        connect.stop()
    assert "slot.message" not in cdc_stack.kafka.topics()  # the heartbeat's message
