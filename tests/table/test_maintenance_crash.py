"""A crash (SIGKILL) at every maintenance failpoint leaves a readable table with every
row, whose snapshots all find their files; running the operation again completes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from readers import duckdb_rows

from stream_sink.catalogs import load_catalog
from stream_sink.failpoints import MAINTENANCE_FAILPOINTS
from stream_sink.table.manifest import read_manifest, read_manifest_list
from stream_sink.tables import IcebergTable

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
        run(warehouse, "rewrite", None)
    return t


def run(warehouse: Path, op: str, failpoint: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("STREAM_SINK_FAILPOINT", None)
    if failpoint:
        env["STREAM_SINK_FAILPOINT"] = failpoint
    return subprocess.run([sys.executable, str(DRIVER), str(warehouse), op],
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip


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


def test_every_maintenance_failpoint_is_exercised() -> None:
    assert {p for _, p in POINTS} == set(MAINTENANCE_FAILPOINTS)


@pytest.mark.parametrize(("op", "point"), POINTS, ids=[p for _, p in POINTS])
def test_crash_at_failpoint_leaves_a_readable_table(tmp_path: Path, op: str, point: str) -> None:
    warehouse = tmp_path / "wh"
    t = make_table(warehouse, compacted=op == "expire")
    crashed = run(warehouse, op, point)
    assert crashed.returncode == -9, f"not killed at {point}: {crashed.stderr[-2000:]}"
    check_readable(t)
    again = run(warehouse, op, None)
    assert again.returncode == 0, again.stderr[-2000:]
    check_readable(t)
    if op == "expire":
        assert len(t.refresh().snapshots()) == 1
