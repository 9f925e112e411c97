"""stream_sink.commit.iceberg.position_deletes killed: ``crash_driver.py`` (no Spark) streams the
scripted changelogs with ``deletes="positions"`` into v2 and v3 tables and is killed
(SIGKILL) at the positions step (``after-position-deletes``: resolved and written, not
committed) and around the table commit, then restarted: every change lands exactly
once, and no snapshot holds an equality delete file.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from changelog import CHANGELOGS, expected_rows
from harness import SCHEMA, live_files, table_rows, watermark
from kill_harness import KillJob
from readers import pyiceberg_rows

from stream_sink.catalogs import load_catalog
from stream_sink.commit.failpoints import (
    AFTER_METADATA_FILE_WRITE,
    AFTER_POSITION_DELETES,
    AFTER_TABLE_COMMIT,
)
from stream_sink.ops.drill.delete_files import equality_delete_snapshots

DRIVER = Path(__file__).parent.parent / "crash_driver.py"
SCENARIOS = [
    (fp, version, changelog)
    for fp in (AFTER_POSITION_DELETES, AFTER_METADATA_FILE_WRITE, AFTER_TABLE_COMMIT)
    for version in (2, 3)
    for changelog in ("plain", "truncating")
]


@pytest.mark.parametrize(
    ("failpoint", "version", "changelog"), SCENARIOS, ids=lambda v: str(v).replace("-", "_")
)
def test_killed_in_a_positions_commit_then_restarted_is_exact(
    tmp_path: Path, failpoint: str, version: int, changelog: str
) -> None:
    catalog = load_catalog("c", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table("db.cdc", schema=SCHEMA, identifier_fields=["id"], format_version=version)
    (tmp_path / "deletes").write_text("positions")
    args = [str(tmp_path), "rocksdb", "1", "synchronous", changelog]
    job = KillJob(DRIVER, args, log=tmp_path / "driver.log", timeout=120)
    first = job.run(f"{failpoint}@2")
    assert first[0] == -signal.SIGKILL, f"not killed at {failpoint}: {first[1][-3000:]}"
    second = job.run()
    assert second[0] == 0, second[1][-3000:]
    table = catalog.load_table("db.cdc")
    batches = CHANGELOGS[changelog]
    assert table_rows(table) == expected_rows(batches)
    got = sorted((r["id"], r["data"]) for r in pyiceberg_rows(table.metadata_location))
    assert got == expected_rows(batches)
    assert watermark(table, "query-1", "cdc") == len(batches) - 1
    # a Puffin file holds the vectors of several data files: one entry per vector
    entries = [(f.file_path, f.referenced_data_file) for f in live_files(table)]
    assert len(entries) == len(set(entries)), "a file is referenced twice"
    assert equality_delete_snapshots(table.refresh()) == []
