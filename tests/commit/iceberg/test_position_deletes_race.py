"""stream_sink.commit.iceberg.position_deletes racing a foreign compaction: ``crash_driver.py``
(no Spark) streams the long changelog with ``deletes="positions"`` into a v2 and a v3
table behind Apache Iceberg's own REST server, while Apache Iceberg Java's
``rewrite_data_files`` compacts the same table again and again. Whatever interleaving
the race takes, no row comes back and none is lost: the stream never fails, the final
table equals the changelog's in our reader, pyiceberg and Java, no snapshot holds an
equality delete file, and Java's compactions landed between the stream's commits (a
compaction that finds the stream's new deletes on its files is refused by Java's own
validation, which the test counts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from changelog import LONG_BATCHES, expected_rows
from harness import SCHEMA, table_rows, watermark
from peers.readers import java_available, read_with_java, sql_with_java_catalog
from readers import pyiceberg_rows

from stream_sink.catalogs import load_catalog
from stream_sink.ops.drill.delete_files import equality_delete_snapshots

DRIVER = Path(__file__).parent.parent / "crash_driver.py"
PAUSE_S = "0.5"  # between the stream's batches, so that compactions can land
pytestmark = [pytest.mark.slow]


def _compact(props: dict[str, Any], name: str) -> str | None:
    """One Java ``rewrite_data_files`` of ``name`` in small file groups, each committed on
    its own (partial progress), so that a group whose files the stream deleted from
    meanwhile is refused alone; None when it committed, else why not."""
    options = {
        "min-input-files": "2",
        "max-file-group-size-bytes": "4096",
        "partial-progress.enabled": "true",
        "partial-progress.max-commits": "32",
    }
    pairs = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    call = f"CALL rc.system.rewrite_data_files(table => '{name}', options => map({pairs}))"
    try:
        sql_with_java_catalog("rc", props, [call], aws=False)
    except AssertionError as e:
        return str(e)
    return None


def _equality_deletes(table: Any) -> list[int]:
    """Ids of the snapshots whose manifests list an equality delete file."""
    return equality_delete_snapshots(table.refresh())


@pytest.mark.timeout(900)
@pytest.mark.parametrize("version", [2, 3])
def test_java_compaction_racing_a_positions_stream_keeps_every_change_once(
    tmp_path: Path, iceberg_rest: Any, version: int
) -> None:
    if not java_available():
        pytest.skip("Apache Iceberg Java (the peer harness) is needed to compact")
    props = {"type": "rest", "uri": iceberg_rest.uri}
    catalog = load_catalog("c", **props)
    ns = f"race{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(ns)
    name = f"{ns}.cdc"
    catalog.create_table(name, schema=SCHEMA, identifier_fields=["id"], format_version=version)
    (tmp_path / "deletes").write_text("positions")
    env = {
        **os.environ,
        "STREAM_SINK_DRIVER_CATALOG": json.dumps(props),
        "STREAM_SINK_DRIVER_TABLE": name,
        "STREAM_SINK_DRIVER_PAUSE_S": PAUSE_S,
    }
    args = [str(tmp_path), "rocksdb", "1", "synchronous", "long"]
    refused: list[str] = []
    calls = 0
    with open(tmp_path / "driver.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), *args], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            while proc.poll() is None:
                calls += 1
                why = _compact(props, name)
                if why is not None:
                    refused.append(why)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    assert proc.returncode == 0, (tmp_path / "driver.log").read_text()[-3000:]
    for why in refused:  # Java's own conflict checks, never a broken table
        assert "ValidationException" in why or "CommitFailedException" in why, why[-3000:]

    table = catalog.load_table(name)
    batches = LONG_BATCHES
    operations = [s.summary.get("operation") for s in table.snapshots()]
    ours = [i for i, s in enumerate(table.snapshots()) if "stream-sink.job-id" in s.summary]
    between = [i for i, op in enumerate(operations) if op == "replace" and ours[0] < i < ours[-1]]
    assert between, f"no compaction between the stream's commits ({calls} calls): {refused}"
    want = expected_rows(batches)
    assert table_rows(table) == want
    assert sorted((r["id"], r["data"]) for r in pyiceberg_rows(table.metadata_location)) == want
    (java,) = read_with_java([table.metadata_location])
    assert sorted((r["id"], r["data"]) for r in java.to_pylist()) == want
    assert watermark(table, "query-1", "cdc") == len(batches) - 1
    assert _equality_deletes(table) == []
