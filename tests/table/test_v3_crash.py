"""A crash while equality deletes become deletion vectors on a v3 table: killed before
the swap, the old vectors stay in force and the new Puffin file is an orphan; killed
after it, the new vectors are the table's. Either way every reader reads the same
rows, and running the conversion again leaves one vector per data file."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from readers import duckdb_rows

from stream_sink.catalogs import load_catalog
from stream_sink.failpoints import AFTER_REWRITE_COMMIT, BEFORE_REWRITE_SWAP
from stream_sink.maintenance.inventory import inventory
from stream_sink.tables import IcebergTable

pytestmark = pytest.mark.slow
DRIVER = Path(__file__).with_name("maintenance_driver.py")
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def upsert(t: IcebergTable, *items: tuple[int, str]) -> None:
    t.upsert(pa.table({"id": [i for i, _ in items], "v": [v for _, v in items]}, ARROW))


def make(warehouse: Path) -> IcebergTable:
    catalog = load_catalog("c", type="hadoop", warehouse=str(warehouse))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", ARROW, identifier_fields=["id"], format_version=3)
    t.append(pa.table({"id": list(range(10)), "v": ["a"] * 10}, ARROW))
    upsert(t, (1, "b"), (2, "b"), (11, "x"), (11, "y"))  # equality deletes and a vector
    t.maintenance.convert_equality_deletes()  # vectors on the first file
    upsert(t, (3, "c"), (4, "c"))  # more equality deletes on that file: a merge is due
    return t


def rows(t: IcebergTable) -> list[tuple[int, str]]:
    got = sorted((r["id"], r["v"]) for r in t.refresh().scan().to_arrow().to_pylist())
    assert sorted((r["id"], r["v"]) for r in duckdb_rows(t.metadata_location)) == got
    return got


def vectors(t: IcebergTable) -> set[tuple[str, int | None]]:
    deletes = inventory(t.refresh(), t.current_snapshot()).deletes
    return {(e.data_file.file_path, e.data_file.content_offset) for e in deletes
            if e.data_file.is_deletion_vector}  # fmt: skip


def puffins(warehouse: Path) -> set[str]:
    return {str(p) for p in warehouse.rglob("*.puffin")}


@pytest.mark.parametrize("point", [BEFORE_REWRITE_SWAP, AFTER_REWRITE_COMMIT])
def test_a_crash_during_conversion_to_vectors(tmp_path: Path, point: str) -> None:
    warehouse = tmp_path / "wh"
    t = make(warehouse)
    expected, old_vectors, old_files = rows(t), vectors(t), puffins(warehouse)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "STREAM_SINK_FAILPOINT": point}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), str(warehouse), "convert"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert rows(t) == expected
    new_files = puffins(warehouse) - old_files
    assert len(new_files) == 1  # the merged vectors, written before the kill
    if point == BEFORE_REWRITE_SWAP:
        assert vectors(t) == old_vectors  # the old vectors stay in force
        referenced = {p for p, _ in vectors(t)}
        assert not (new_files & {p.removeprefix("file:") for p in referenced})  # an orphan
    else:
        assert {p.removeprefix("file:") for p, _ in vectors(t)} <= new_files | old_files
    t.maintenance.convert_equality_deletes()
    assert rows(t) == expected
    per_file = Counter(e.data_file.referenced_data_file
                       for e in inventory(t.refresh(), t.current_snapshot()).deletes
                       if e.data_file.is_deletion_vector)  # fmt: skip
    assert per_file and max(per_file.values()) == 1
