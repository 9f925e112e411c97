"""Tests stream_sink.commit.iceberg.position_deletes against Apache Iceberg Java: every
snapshot of a ``deletes="positions"`` changelog stream (updates, deletes, a key deleted
and inserted again) on v2 (position delete files) and v3 (deletion vectors) is read by
Iceberg 1.10 (peer set iceberg-spark-3.5) and Iceberg 1.12 (iceberg-spark-4.1) exactly
as by ours and pyiceberg, each Java in one JVM for every snapshot of both tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from changelog import CHANGELOGS, expected_rows, write_changes
from harness import SCHEMA, Harness
from peers.readers import java_available, read_with_java
from readers import pyiceberg_table

from stream_sink.catalogs import load_catalog
from stream_sink.ops.drill.delete_files import equality_delete_snapshots
from stream_sink.read.scan import TableScan

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(1800)]


def _rows(rows: list[dict]) -> list[tuple[int, str]]:
    return sorted((r["id"], r["data"]) for r in rows)


def test_every_snapshot_of_a_positions_stream_reads_the_same_in_iceberg_java_1_10_and_1_12(
    tmp_path: Path,
) -> None:
    if not java_available():
        pytest.skip("Apache Iceberg Java (the peer harness) is needed")
    catalog = load_catalog("j", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    batches = CHANGELOGS["plain"]
    locations: list[str] = []
    want: list[list[tuple[int, str]]] = []
    for version in (2, 3):
        table = catalog.create_table(
            f"db.v{version}", schema=SCHEMA, identifier_fields=["id"], format_version=version
        )
        h = Harness(tmp_path / f"v{version}", table, "memory", job_id="j", deletes="positions")
        h.open()
        for i, batch in enumerate(batches):
            h.step(i, write_changes(table, batch))
            snapshot = table.refresh().current_snapshot()
            assert snapshot is not None
            locations.append(f"{table.metadata_location}@{snapshot.snapshot_id}")
            want.append(expected_rows(batches[: i + 1]))
        h.close()
        assert equality_delete_snapshots(table.refresh()) == []
        theirs = pyiceberg_table(table.metadata_location)
        for snap in table.snapshots():
            ours = TableScan(table, snapshot_id=snap.snapshot_id).to_arrow().to_pylist()
            read = theirs.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()
            assert _rows(ours) == _rows(read)
    for iceberg_set in (None, "iceberg-spark-4.1"):
        read = read_with_java(locations, iceberg_set)
        for location, rows, expected in zip(locations, read, want, strict=True):
            assert _rows(rows.to_pylist()) == expected, (iceberg_set or "1.10", location)
