"""The maintenance lock: one holder per table across maintainers, on both catalogs; an
expired lease is taken over; the CLI gives up with exit 1 while a sink holds it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from maint_support import SCHEMA

from stream_sink.catalogs import load_catalog
from stream_sink.cli.main import main
from stream_sink.maintenance import MaintenanceLock, MaintenanceLockedError
from stream_sink.table.catalog import Catalog


@pytest.fixture(params=["hadoop", "sqlite"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Catalog:
    if request.param == "hadoop":
        c = load_catalog("local", type="hadoop", warehouse=str(tmp_path / "wh"))
    else:
        c = load_catalog(
            "local", type="sql", uri=f"sqlite:///{tmp_path}/cat.db", warehouse=str(tmp_path / "wh")
        )
    c.create_namespace("db")
    c.create_table("db.t", schema=SCHEMA)
    c.create_table("db.u", schema=SCHEMA)
    return c


def test_one_holder_at_a_time(catalog: Catalog) -> None:
    t1, t2 = catalog.load_table("db.t"), catalog.load_table("db.t")
    a = MaintenanceLock.for_table(t1, "sink")
    b = MaintenanceLock.for_table(t2, "cli")
    assert a.try_acquire()
    assert not b.try_acquire()
    assert b.holder() == a.owner
    with pytest.raises(MaintenanceLockedError, match="lock held by sink"):
        b.acquire()
    # another table is independent
    assert MaintenanceLock.for_table(catalog.load_table("db.u")).try_acquire()
    assert a.renew()
    a.release()
    assert b.try_acquire()
    assert not a.renew()  # a lost it: renewing never takes someone else's lease
    b.release()
    assert b.holder() is None


def test_an_expired_lease_is_taken_over(catalog: Catalog) -> None:
    table = catalog.load_table("db.t")
    dead = MaintenanceLock.for_table(table, "crashed", lease_ms=3000)
    assert dead.try_acquire()
    other = MaintenanceLock.for_table(table, "next")
    assert not other.try_acquire()
    time.sleep(3.1)
    assert other.try_acquire()
    assert not dead.renew()
    dead.release()  # releasing a lost lease leaves the new holder alone
    assert other.holder() == other.owner
    other.release()


def test_cli_gives_up_while_the_lock_is_held(
    catalog: Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = catalog.load_table("db.t")
    table.append(pa.table({"id": [1], "cat": ["a"], "v": [1]}, schema=SCHEMA))
    wh = str(tmp_path / "wh")
    args = ["maintain", "db.t", "--rewrite-data-files", "--json", "--warehouse", wh]
    if type(catalog).__name__ == "SqlCatalog":
        args += ["--catalog-uri", f"sqlite:///{tmp_path}/cat.db"]
    with MaintenanceLock.for_table(table, "sink"):
        assert main(args) == 1
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "lock held by sink" in err
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["results"][0]["action"] == "rewrite-data-files"


def test_a_restarted_sink_takes_back_its_own_lease(catalog: Catalog) -> None:
    table = catalog.load_table("db.t")
    killed = MaintenanceLock.for_table(table, owner="sink:orders")
    assert killed.try_acquire()  # ...and the process dies without releasing
    restarted = MaintenanceLock.for_table(catalog.load_table("db.t"), owner="sink:orders")
    assert restarted.try_acquire()
    other = MaintenanceLock.for_table(table, "cli")
    assert not other.try_acquire()
    restarted.release()
    assert other.try_acquire()
    other.release()
