"""In-sink maintenance of a routed sink (``stream_sink.spark.foreach_batch.routing.maintenance``, no
Spark): each table has its own triggers, one table's run at a time per sink, at most one
run started per micro-batch, the tables due meanwhile served oldest first."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
from maint_support import CdcTable, live_counts, ours

from stream_sink.catalogs import load_catalog
from stream_sink.maintenance import MaintenanceOptions
from stream_sink.spark.foreach_batch.routing.maintenance import RoutedMaintenance
from stream_sink.table.catalog import Catalog

NAMES = ("db.a", "db.b", "db.c")
OPTIONS = MaintenanceOptions(
    commit_count=2, min_input_files=2, expire_snapshots=False, background=False
)


class HeldCatalog:
    """The catalog, whose ``load_table`` (called by a maintenance run) waits while held."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()

    def load_table(self, name: str) -> Any:
        self.entered.set()
        assert self.release.wait(120)
        return self.catalog.load_table(name)


@pytest.fixture
def tables(tmp_path: Path) -> dict[str, CdcTable]:
    catalog = load_catalog("m", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    from maint_support import SCHEMA

    return {
        n: CdcTable(
            catalog.create_table(n, schema=SCHEMA, identifier_fields=["id"]), random.Random(i)
        )
        for i, n in enumerate(NAMES)
    }


def _commit(tables: dict[str, CdcTable], names: tuple[str, ...] = NAMES) -> dict[str, Any]:
    for n in names:
        tables[n].commit_batch(10)
    return {n: tables[n].table.metadata for n in names}


def _routed(tables: dict[str, CdcTable], options: MaintenanceOptions = OPTIONS) -> Any:
    catalog = HeldCatalog(next(iter(tables.values())).table.catalog)
    routed = RoutedMaintenance(catalog, options, "s")  # type: ignore[arg-type]
    for n in NAMES:
        routed.open_table(n, frozenset)
    return routed, catalog


def test_one_run_per_micro_batch_each_table_in_turn(tables: dict[str, CdcTable]) -> None:
    routed, _ = _routed(tables)
    assert routed.after_checkpoint(_commit(tables)) is None  # one commit each: not due
    assert routed.after_checkpoint(_commit(tables)) == "db.a"  # all due: one run
    assert live_counts(tables["db.a"].table)["eq"] == 0
    assert live_counts(tables["db.b"].table)["eq"] > 0  # waits for a later micro-batch
    assert routed.after_checkpoint({}) == "db.b"
    assert routed.after_checkpoint(_commit(tables, ("db.a",))) == "db.c"
    assert routed.after_checkpoint({}) is None  # db.a: one commit since its run
    for n, cdc in tables.items():
        assert ours(cdc.table) == cdc.expected(), n
        assert routed.metrics_by_table[n].runs == 1
        assert live_counts(cdc.table)["eq"] == (1 if n == "db.a" else 0)
    assert routed.metrics.runs == 3 and routed.metrics.failures == 0
    assert routed.metrics.consecutive_failures == 0 and not routed.metrics.failing
    assert routed.metrics.last_success_ms == max(
        m.last_success_ms or 0 for m in routed.metrics_by_table.values()
    )


def test_no_table_starts_while_another_tables_run_is_under_way(
    tables: dict[str, CdcTable],
) -> None:
    import dataclasses

    routed, catalog = _routed(tables, dataclasses.replace(OPTIONS, background=True))
    routed.after_checkpoint(_commit(tables))
    catalog.release.clear()
    assert routed.after_checkpoint(_commit(tables)) == "db.a"  # runs on a driver thread
    assert catalog.entered.wait(60)
    assert routed.running == "db.a"
    assert routed.after_checkpoint(_commit(tables, ("db.b", "db.c"))) is None
    catalog.release.set()
    routed.wait()
    assert routed.running is None
    assert routed.after_checkpoint({}) == "db.b"
    routed.wait()
    assert routed.after_checkpoint({}) == "db.c"
    routed.wait()
    assert {n: m.runs for n, m in routed.metrics_by_table.items()} == dict.fromkeys(NAMES, 1)
    for cdc in tables.values():
        assert ours(cdc.table) == cdc.expected()
