"""Maintenance on a REST catalog's table (SeaweedFS: the catalog keeps no lock and its
table bucket takes no lock file): the lock is a log of lease objects, created by
conditional PUT, in the directory the table property ``stream-sink.maintenance.
lock-location`` names (here the ``ckpt`` bucket). One holder at a time, even among
racers; an expired lease is taken over; the same owner takes its lease back; without
the property the lock is refused saying what to set, except that a sink's in-job
maintenance records a location beside its own checkpoints (an explicit one is kept).
``stream-sink maintain`` compacts, converts, expires and removes orphans on such a table
under that lock, and gives up while another maintainer holds it; on a table that names
no lock location it says to pass ``--lock-location``, which records one."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest
from maint_support import make_cdc_table, ours
from test_in_sink import _stream

from stream_sink.cli.main import main
from stream_sink.exceptions import UnsupportedError
from stream_sink.maintenance import Maintenance, MaintenanceLock, MaintenanceLockedError
from stream_sink.maintenance.lease_lock import adopt_lock_location, sink_lock_location
from stream_sink.maintenance.lock import LOCK_LOCATION
from stream_sink.maintenance.options import MaintenanceOptions

pytestmark = pytest.mark.slow


def locked_table(rest_catalog: Any, name: str, batches: int = 2) -> Any:
    ns = rest_catalog.test_namespace
    props = {LOCK_LOCATION: f"s3://ckpt/locks-{ns}"}
    return make_cdc_table(
        rest_catalog, f"{ns}.{name}", batches=batches, rows=10, seed=4, properties=props
    ).table


def test_one_holder_takeover_after_expiry_and_same_owner_reclaim(rest_catalog: Any) -> None:
    table = locked_table(rest_catalog, "lease")
    a = MaintenanceLock.for_table(table, owner="sink-a")
    b = MaintenanceLock.for_table(table, owner="cli-b", lease_ms=300)
    assert a.try_acquire()
    assert not b.try_acquire() and b.holder() == "sink-a"
    with pytest.raises(MaintenanceLockedError, match="sink-a"):
        b.acquire()
    assert a.renew()
    restarted = MaintenanceLock.for_table(table, owner="sink-a")  # a killed sink's successor
    assert restarted.try_acquire()
    restarted.release()
    assert b.try_acquire() and b.holder() == "cli-b"
    assert not a.renew()  # lost: held by another now
    time.sleep(0.6)  # b's short lease lapses without renewal
    assert a.holder() is None and a.try_acquire()
    assert not b.renew()
    a.release()
    assert a.holder() is None


def test_racers_from_one_state_get_exactly_one_lease(rest_catalog: Any) -> None:
    table = locked_table(rest_catalog, "race", batches=1)
    locks = [MaintenanceLock.for_table(table, owner=f"m{i}") for i in range(6)]
    start = threading.Barrier(len(locks))
    won: list[str] = []

    def race(lock: Any) -> None:
        start.wait()
        if lock.try_acquire():
            won.append(lock.owner)

    threads = [threading.Thread(target=race, args=(lock,)) for lock in locks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert locks[0].holder() == won[0]


def test_without_a_lock_location_the_lock_is_refused_naming_the_property(
    rest_catalog: Any,
) -> None:
    ns = rest_catalog.test_namespace
    table = make_cdc_table(rest_catalog, f"{ns}.nolock", batches=1, rows=3).table
    with pytest.raises(UnsupportedError, match=re.escape(LOCK_LOCATION)):
        Maintenance(table).lock()


def test_cli_maintain_on_a_rest_table_under_the_lease_lock(
    rest_catalog: Any, seaweed: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    table = locked_table(rest_catalog, "maintained", batches=5)
    expected = ours(table)
    old_snapshots = {s.snapshot_id for s in table.snapshots()}
    args = ["maintain", table.name, "--all", "--min-input-files", "2", "--older-than", "0s"]
    args += ["--orphan-older-than", "0s", "--json", *rest_cli(seaweed)]

    other = MaintenanceLock.for_table(table, owner="in-sink")
    assert other.try_acquire()
    assert main(args) == 1
    assert "in-sink" in capsys.readouterr().err
    other.release()

    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    before, after = report["before"], report["after"]
    assert after["data_files"] < before["data_files"]
    assert after["equality_deletes"] == 0 < before["equality_deletes"]
    # every snapshot from before the run expired (the run's own commits stay)
    assert not old_snapshots & {s.snapshot_id for s in table.refresh().snapshots()}
    actions = [r["action"] for r in report["results"]]
    assert "expire-snapshots" in actions and "remove-orphan-files" in actions
    assert ours(table) == expected
    assert MaintenanceLock.for_table(table, owner="x").holder() is None  # released


def rest_cli(seaweed: Any) -> list[str]:
    """The CLI's options for the SeaweedFS REST catalog and its S3 store."""
    cli = ["--catalog-type", "rest", "--catalog-uri", seaweed.catalog_uri]
    cli += ["--warehouse", "s3://warehouse", "--catalog-name", "lake"]
    for key, value in seaweed.rest_props("warehouse").items():
        if key not in ("uri", "warehouse"):
            cli += ["--catalog-property", f"{key}={value}"]
    return cli


def test_cli_maintain_on_a_rest_table_without_a_lock_location_says_what_to_pass(
    rest_catalog: Any, seaweed: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """No lock location on the table, no sink to record one: ``maintain`` gives up
    naming ``--lock-location`` and the property, changing nothing; with
    ``--lock-location`` it records the property and runs under the lock there, which
    the next runs and the sinks then share; a later ``--lock-location`` keeps it."""
    ns = rest_catalog.test_namespace
    table = make_cdc_table(rest_catalog, f"{ns}.clinolock", batches=3, rows=10, seed=4).table
    expected = ours(table)
    snapshots = len(table.snapshots())
    args = ["maintain", table.name, "--rewrite-data-files", "--min-input-files", "2", "--json"]
    args += rest_cli(seaweed)

    assert main(args) == 1
    err = capsys.readouterr().err
    assert "gave up" in err and "--lock-location DIR" in err and LOCK_LOCATION in err
    table = table.refresh()
    assert LOCK_LOCATION not in table.properties and len(table.snapshots()) == snapshots

    chosen = f"s3://ckpt/cli-locks-{ns}"
    assert main([*args, "--lock-location", chosen]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["after"]["data_files"] < report["before"]["data_files"]
    assert table.refresh().properties[LOCK_LOCATION] == chosen
    assert ours(table) == expected

    held = MaintenanceLock.for_table(table.refresh(), owner="in-sink")
    assert held.try_acquire()  # a sink's maintenance takes the same lock
    assert main(args) == 1 and "in-sink" in capsys.readouterr().err
    held.release()
    assert main([*args, "--lock-location", "s3://ckpt/elsewhere"]) == 0
    assert "kept (never replaced)" in capsys.readouterr().err
    assert table.refresh().properties[LOCK_LOCATION] == chosen
    assert ours(table) == expected


def test_in_sink_maintenance_on_a_rest_table_records_its_lock_beside_its_checkpoints(
    rest_catalog: Any, tmp_path: Any
) -> None:
    """No lock location on the table: the sink's maintenance records one beside the
    sink's own checkpoints (``s3://ckpt/...`` here) and every run succeeds; the CLI's
    lock then shares it."""
    ns = rest_catalog.test_namespace
    options = MaintenanceOptions(
        commit_count=4, max_snapshot_age_ms=0, retain_last=2, min_input_files=3, background=False
    )
    beside = sink_lock_location(f"s3://ckpt/chk-{ns}", "t")
    cdc, maintenance, counts = _stream(
        rest_catalog, tmp_path, options, batches=12, name=f"{ns}.t", lock_location=beside
    )
    m = maintenance.metrics
    assert m.runs == 3 and m.failures == 0 and m.skipped_locked == 0, m.last_error
    assert max(c["snapshots"] for c in counts[4:]) <= 2 + 4 + 4  # kept bounded
    assert ours(cdc.table) == cdc.expected()
    assert cdc.table.refresh().properties[LOCK_LOCATION] == beside

    held = MaintenanceLock.for_table(cdc.table.refresh(), owner="cli")
    assert held.try_acquire()
    try:
        maintenance.run_once()
        assert maintenance.metrics.skipped_locked == 1
    finally:
        held.release()


def test_an_explicit_lock_location_is_kept(rest_catalog: Any) -> None:
    table = locked_table(rest_catalog, "explicit", batches=1)
    explicit = table.properties[LOCK_LOCATION]
    adopted = adopt_lock_location(table, sink_lock_location("s3://ckpt/elsewhere", "s"))
    assert adopted.refresh().properties[LOCK_LOCATION] == explicit
