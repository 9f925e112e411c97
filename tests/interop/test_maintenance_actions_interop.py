"""Our maintenance actions against independent readers (one Java SQL call and one Java
read for the module):

- CDC tables after our compaction and equality-delete conversion: Java, DuckDB,
  pyiceberg and our reader all equal the model;
- a streaming upsert job (with in-job maintenance) killed at random while
  ``stream-sink maintain`` compacts, converts and expires to one snapshot in a loop,
  and Java's ``expire_snapshots(retain_last => 1)`` runs between restarts: every change
  exactly once in Java, DuckDB and ours; after a final maintain pyiceberg reads the
  same rows and the live data files are few.
"""

from __future__ import annotations

import contextlib
import random
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_rows, pyiceberg_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "maintenance"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from kill_harness import KillJob, kill_rng, write_batches
from maint_support import live_counts, make_cdc_table, ours, rows_of

import stream_sink as ss
from stream_sink.catalogs import load_catalog
from stream_sink.cli.main import main as cli

pytestmark = [pytest.mark.interop, pytest.mark.spark]

SHAPES = {"plain": [], "bucketed": [("bucket", "id", 4)]}
JOB = Path(__file__).with_name("maintenance_kill_job.py")
FILES, ROWS, KEYS = 9, 30, 60


def _java_rows(t: pa.Table, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in t.to_pylist())


def _compacted_tables(root: Path) -> tuple[list[str], list[list[tuple[Any, ...]]]]:
    catalog = load_catalog("m", type="hadoop", warehouse=str(root / "cdc"))
    catalog.create_namespace("db")
    locations, expected = [], []
    for seed, (name, spec) in enumerate(SHAPES.items()):
        cdc = make_cdc_table(
            catalog, f"db.{name}", batches=8, rows=40, seed=seed, partition_spec=spec
        )
        table, m = cdc.table, cdc.table.maintenance
        m.rewrite_data_files(min_input_files=3)
        compacted = table.refresh().current_snapshot()
        assert compacted is not None
        at_compaction = sorted(
            zip(
                *(
                    table.scan(snapshot_id=compacted.snapshot_id).to_arrow()[c].to_pylist()
                    for c in ("id", "cat", "v")
                ),
                strict=True,
            )
        )
        cdc.commit_batch(40)  # more changes on top of the compacted files
        m.convert_equality_deletes()
        converted = table.refresh().metadata_location
        assert ours(table) == cdc.expected()
        assert rows_of(duckdb_rows(converted)) == cdc.expected()
        assert rows_of(pyiceberg_rows(converted)) == cdc.expected()
        locations += [converted, f"{table.location}@{compacted.snapshot_id}"]
        expected += [cdc.expected(), at_compaction]
    return locations, expected


# --- the kill scenario ------------------------------------------------------------------


def _prepare_stream(root: Path) -> dict[int, str]:
    catalog = ss.load_catalog("kill", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    catalog.create_table(
        "db.latest",
        schema=pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())]),
        identifier_fields=["id"],
    )
    rng, latest, seq, batches = random.Random(5), {}, 0, []
    for _ in range(FILES):
        rows = []
        for _ in range(ROWS):
            seq += 1
            key = rng.randrange(KEYS)
            if key in latest and rng.random() < 0.15:
                del latest[key]
                rows.append({"id": key, "data": None, "seq": seq, "op": "-D"})
            else:
                latest[key] = f"v{seq}"
                rows.append({"id": key, "data": f"v{seq}", "seq": seq, "op": "+U"})
        batches.append(rows)
    write_batches(root / "in", batches)
    return latest


def _job(root: Path) -> KillJob:
    return KillJob(JOB, [str(root)], log=root / "job.log", timeout=900)


class _MaintainLoop:
    """``stream-sink maintain --all --older-than 0s --retain-last 1`` over and over.

    ``paused()`` holds the loop between two runs: Java's procedure call then races only
    the stream. (Two engines expiring one table at once can each delete a manifest list
    the other's in-flight read has just loaded; that is not what this test checks.)
    """

    def __init__(self, warehouse: str) -> None:
        self.args = [
            "maintain",
            "db.latest",
            "--all",
            "--older-than",
            "0s",
            "--retain-last",
            "1",
            "--min-input-files",
            "2",
            "--orphan-older-than",
            "1h",
            "--json",
            "--warehouse",
            warehouse,
        ]
        self.codes: list[int] = []
        self._stop = threading.Event()
        self._running = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._running:
                self.codes.append(cli(self.args))  # 1: gave up (lock held, conflict): fine
            self._stop.wait(0.5)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._running:
            yield

    def __enter__(self) -> _MaintainLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=600)


@pytest.mark.timeout(1800)
def test_maintenance_beside_streams_and_engines(
    tmp_path: Path, java_sql: Any, java_read: Any
) -> None:
    locations, expected = _compacted_tables(tmp_path)
    columns = [("id", "cat", "v")] * len(locations)

    latest = _prepare_stream(tmp_path)
    wh = str(tmp_path / "wh")
    rng, job = kill_rng(7), _job(tmp_path)
    with _MaintainLoop(wh) as loop:
        job.killed_mid_stream(rng, delay=(1.0, 6.0))
        with loop.paused():
            java_sql(
                wh,
                [
                    "CALL hc.system.expire_snapshots(table => 'db.latest', "
                    "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
                ],
            )
        job.killed_mid_stream(rng, delay=(1.0, 6.0))
        job.run_to_end()
    assert loop.codes and 0 in loop.codes

    catalog = ss.load_catalog("kill", type="hadoop", warehouse=wh)
    table = catalog.load_table("db.latest")
    want = sorted(latest.items())
    got = table.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["data"]) for r in got) == want
    assert sorted((r["id"], r["data"]) for r in duckdb_rows(table.metadata_location)) == want

    assert (
        cli(
            [
                "maintain",
                "db.latest",
                "--all",
                "--older-than",
                "0s",
                "--retain-last",
                "1",
                "--min-input-files",
                "1",
                "--warehouse",
                wh,
            ]
        )
        == 0
    )
    table.refresh()
    assert sorted((r["id"], r["data"]) for r in pyiceberg_rows(table.metadata_location)) == want
    assert live_counts(table) == {"data": 1, "pos": 0, "eq": 0}
    assert len(table.snapshots()) == 1
    locations.append(table.metadata_location)  # what the final maintain left
    expected.append(want)
    columns.append(("id", "data"))

    for got_t, want_rows, cols in zip(java_read(locations), expected, columns, strict=True):
        assert _java_rows(got_t, cols) == want_rows
