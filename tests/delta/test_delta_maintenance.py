"""In-sink maintenance of a Delta table (no Spark): a long upsert loop whose bounded
compaction (``dataChange=false``) and vacuum keep the live files and the files on disk
bounded, every version exact in delta-rs and DuckDB; vacuum keeps what a version within
``delta.deletedFileRetentionDuration`` still reads."""

from __future__ import annotations

import dataclasses
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest
from delta_readers import delta_rs_rows, duckdb_delta_rows

from stream_sink.delta import AddFile, CommitInfo, DeltaMaintenanceOptions, DeltaTable, RemoveFile
from stream_sink.delta.maintenance import DeltaMaintenanceMetrics, due, run
from stream_sink.delta.merge import copy_on_write
from stream_sink.delta.optimize import optimize
from stream_sink.delta.vacuum import vacuum
from stream_sink.exceptions import InvalidOptionError

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
KEYS = 400


def upsert(table: DeltaTable, rng: random.Random, model: dict[int, int], step: int) -> None:
    ids = rng.sample(range(KEYS), 40)
    changes = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": [f"p{i % 2}" for i in ids],
            "v": pa.array([step] * len(ids), pa.int64()),
        }
    )
    batch = copy_on_write(table.snapshot, table.io, changes, ["id"], "upsert")
    txn = table.new_transaction().add_all(batch.adds).add_all(batch.removes)
    txn.read_files(r.path for r in batch.removes).commit("MERGE")
    model.update(dict.fromkeys(ids, step))


def data_files_on_disk(location: str) -> int:
    return sum(
        1
        for p in Path(location).rglob("*.parquet")
        if not any(part.startswith("_") for part in p.relative_to(location).parts)
    )


def operation(actions: list[object]) -> str | None:
    infos = [a for a in actions if isinstance(a, CommitInfo)]
    return str(infos[0].values.get("operation")) if infos else None


def rows(location: str) -> list[tuple[int, int]]:
    return sorted((r["id"], r["v"]) for r in delta_rs_rows(location))


@pytest.mark.slow
def test_bounded_compaction_and_vacuum_keep_a_long_upsert_loop_flat(tmp_path: Path) -> None:
    loc = str(tmp_path / "t")
    table = DeltaTable.create(
        loc,
        SCHEMA,
        partition_by=["p"],
        configuration={"delta.deletedFileRetentionDuration": "interval 0 seconds"},
    )
    options = DeltaMaintenanceOptions(every_versions=6, min_input_files=3, max_compacted_files=8)
    metrics = DeltaMaintenanceMetrics()
    rng, model, backlog = random.Random(3), {}, False
    late: dict[str, int] = {"live": 0, "disk": 0}
    for step in range(90):
        upsert(table, rng, model, step)
        if due(table.refresh().version, options, backlog):
            backlog = run(table, options, metrics)
        if step >= 45:
            live = len(table.refresh().snapshot.files)
            late = {
                "live": max(late["live"], live),
                "disk": max(late["disk"], data_files_on_disk(loc)),
            }
    assert metrics.failures == 0, metrics.last_error
    assert metrics.compacted_files > 0 and metrics.vacuumed_files > 0
    # a MERGE adds about two files a partition; six versions between runs, eight per run
    assert late["live"] <= 40 and late["disk"] <= late["live"] + 30, late
    want = sorted(model.items())
    assert rows(loc) == want
    assert sorted((r["id"], r["v"]) for r in duckdb_delta_rows(loc)) == want
    versions = [table.log.read_commit(v) for v in range(1, table.refresh().version + 1)]
    optimizes = [a for a in versions if operation(a) == "OPTIMIZE"]
    assert optimizes
    for actions in optimizes:  # rows did not change: a streaming reader skips them
        files = [a for a in actions if isinstance(a, (AddFile, RemoveFile))]
        assert files and not any(a.data_change for a in files)


def test_vacuum_keeps_what_versions_within_the_retention_read(tmp_path: Path) -> None:
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA, partition_by=["p"])  # default: 7 days
    rng, model = random.Random(5), {}
    for step in range(6):
        upsert(table, rng, model, step)
    first = table.refresh().version
    r = optimize(table, min_input_files=2)
    assert r.removed_files > 0 and r.version == first + 1
    before = rows(loc)
    assert vacuum(table).deleted_files == 0  # every removed file is within the retention
    assert sorted((r["id"], r["v"]) for r in delta_rs_rows(loc, version=first)) == before
    future = 8 * 24 * 3600 * 1000 + int(time.time() * 1000)
    done = vacuum(table, now_ms=future, max_files=3)
    assert done.deleted_files == 3 and done.remaining_files > 0
    while vacuum(table, now_ms=future, max_files=3).remaining_files:
        pass
    assert rows(loc) == before == sorted(model.items())
    assert data_files_on_disk(loc) == len(table.refresh().snapshot.files)


def test_options_are_checked() -> None:
    with pytest.raises(InvalidOptionError, match="max_compacted_files"):
        DeltaMaintenanceOptions(max_compacted_files=1)
    with pytest.raises(InvalidOptionError, match="every_versions"):
        DeltaMaintenanceOptions(every_versions=0)


def test_a_failed_run_is_counted_never_raised_and_retried_at_the_next_due_version(
    tmp_path: Path,
) -> None:
    """``after_commit``, as both front doors call it after their commits: a vacuum that
    cannot read the table's retention fails the run (compaction still runs), the failure
    is counted and the commit goes on; the next due version runs again and, the setting
    fixed, completes. The metrics survive a report's round trip (the Data Source route
    keeps them in a file between its commits' workers)."""
    from stream_sink.delta.maintenance import after_commit, read_report, write_report
    from stream_sink.io.fileio import FileIO

    loc = str(tmp_path / "t")
    retention = "delta.deletedFileRetentionDuration"
    table = DeltaTable.create(loc, SCHEMA, configuration={retention: "soon"})
    rng, model = random.Random(4), dict[int, int]()
    options = DeltaMaintenanceOptions(every_versions=4, min_input_files=2)
    metrics = DeltaMaintenanceMetrics()
    ran = []
    for step in range(1, 7):  # versions 1-4, the run's OPTIMIZE 5, then 6 and 7
        upsert(table, rng, model, step)
        ran.append(after_commit(table, options, metrics))
    assert ran == [False, False, False, True, False, False]  # version 4 is due
    assert (metrics.runs, metrics.failures) == (1, 1) and metrics.compacted_files > 0
    assert "vacuum" in (metrics.last_error or "") and "soon" in (metrics.last_error or "")

    fixed = {retention: "interval 0 seconds"}
    meta = dataclasses.replace(table.refresh().snapshot.metadata, configuration=fixed)
    table.new_transaction().add(meta).commit("SET TBLPROPERTIES")
    assert after_commit(table, options, metrics)  # version 8: the next due one
    assert (metrics.runs, metrics.failures) == (2, 1) and metrics.vacuumed_files > 0
    assert rows(loc) == sorted(model.items())

    report = str(tmp_path / "chk" / "sink" / "maintenance.json")
    io = FileIO.for_location(report)
    assert read_report(io, report) == DeltaMaintenanceMetrics()  # none yet: zeros
    write_report(io, report, metrics)
    assert read_report(io, report) == metrics
