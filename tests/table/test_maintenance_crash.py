"""A crash (SIGKILL) at every maintenance failpoint leaves a readable table with every
row, whose snapshots all find their files; running the operation again completes it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from compaction import commit_compaction, plan_compaction
from kill_harness import KillJob
from readers import duckdb_rows

from stream_sink.catalogs import load_catalog
from stream_sink.failpoints import MAINTENANCE_FAILPOINTS
from stream_sink.table.manifest import read_manifest, read_manifest_list
from stream_sink.tables import IcebergTable

pytestmark = pytest.mark.slow  # maintenance processes killed

DRIVER = Path(__file__).resolve().parent / "maintenance_driver.py"
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
EXPECTED = [(1, "a"), (2, "u"), (3, "u"), (4, "c")]
POINTS = [
    ("rewrite", "after-rewrite-files"),
    ("rewrite", "before-rewrite-swap"),
    ("rewrite", "after-rewrite-commit"),
    ("expire", "after-expire-metadata"),
    ("expire", "after-expire-files"),
]


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table({"id": [p[0] for p in pairs], "data": [p[1] for p in pairs]}, schema=ARROW)


def make_table(warehouse: Path, compacted: bool) -> IcebergTable:
    catalog = load_catalog("c", type="hadoop", warehouse=str(warehouse))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", ARROW, identifier_fields=["id"])
    t.append(rows((1, "a"), (2, "a")))
    t.upsert(rows((2, "u"), (3, "u")))
    t.append(rows((4, "c")))
    if compacted:  # expiry then has files to delete
        rerun(t, "rewrite")
    return t


def driver(warehouse: Path, op: str) -> KillJob:
    """``maintenance_driver.py`` running ``op`` on ``warehouse``'s table."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    log = warehouse.parent / "driver.log"
    return KillJob(DRIVER, [str(warehouse), op], env=env, log=log, timeout=300)


def rerun(t: IcebergTable, op: str) -> None:
    """The operation again, in this process, without a failpoint."""
    t.refresh()
    if op == "rewrite":
        commit_compaction(t, plan_compaction(t), use_starting_sequence_number=True)
    else:
        t.new_expire_snapshots().expire_older_than(2**62).retain_last(1).commit()


def check_readable(t: IcebergTable) -> None:
    t.refresh()
    for snap in t.snapshots():
        for m in read_manifest_list(t.io, snap.manifest_list):
            for e in read_manifest(t.io, m):
                if e.is_live:
                    assert os.path.exists(e.data_file.file_path), e.data_file.file_path
    got = t.scan().to_arrow()
    assert sorted(zip(got["id"].to_pylist(), got["data"].to_pylist(), strict=True)) == EXPECTED
    assert sorted((r["id"], r["data"]) for r in duckdb_rows(t.metadata_location)) == EXPECTED


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[IcebergTable, int, str]]:
    """Every scenario's table after its driver was killed (the drivers run concurrently):
    failpoint -> (table, return code, stderr)."""
    tables, jobs, procs = {}, {}, {}
    for op, point in POINTS:
        warehouse = tmp_path_factory.mktemp(point) / "wh"
        tables[point] = make_table(warehouse, compacted=op == "expire")
        jobs[point] = driver(warehouse, op)
        procs[point] = jobs[point].start(point)
    out = {}
    for point, proc in procs.items():
        code, output = jobs[point].finish(proc)
        out[point] = (tables[point], code, output)
    return out


def test_every_maintenance_failpoint_is_exercised() -> None:
    assert {p for _, p in POINTS} == set(MAINTENANCE_FAILPOINTS)


@pytest.mark.parametrize(("op", "point"), POINTS, ids=[p for _, p in POINTS])
def test_crash_at_failpoint_leaves_a_readable_table(
    crashed: dict[str, tuple[IcebergTable, int, str]], op: str, point: str
) -> None:
    t, returncode, stderr = crashed[point]
    assert returncode == -9, f"not killed at {point}: {stderr[-2000:]}"
    check_readable(t)
    rerun(t, op)
    check_readable(t)
    if op == "expire":
        assert len(t.refresh().snapshots()) == 1
