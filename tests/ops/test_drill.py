"""``stream-sink drill`` end to end: a failpoint per protocol phase in upsert mode keeps
every row exactly once (read with the project's reader and DuckDB), and a drill of a
deliberately broken committer fails, naming the duplicates.

Each scenario starts Spark in a child process once per kill, so this module takes
minutes; it needs no in-process Spark session.

A routed drill (``--target routed``) kills inside and after the transaction that
commits its three tables, and finds each table exact and the tables agreeing.

A positions drill (``--deletes positions``) kills once a commit's deletes are resolved
and written, on one table and routed, and finds every table exact for pyiceberg too,
with no equality delete file in any snapshot.

Tests stream_sink.ops.drill.child: the drill's driver process.
Tests stream_sink.ops.drill.agreement: the tables of a routed drill hold one checkpoint.
Tests stream_sink.ops.drill.mistakes: operator mistakes refused, nothing lost.
Tests stream_sink.ops.drill.delete_files: the positions drill's checks.
Tests stream_sink.ops.duckdb_reader: DuckDB as the drill's second reader.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stream_sink.cli.main import main
from stream_sink.commit.failpoints import (
    AFTER_DATA_FILES,
    AFTER_POSITION_DELETES,
    AFTER_STAGED_WRITE,
    AFTER_TABLE_COMMIT,
    AFTER_TABLES_COMMIT,
    INSIDE_TABLES_SWAP,
    LOST_TABLES_ANSWER,
)
from stream_sink.ops.drill.jobs import ROUTED_TABLES

pytestmark = [
    pytest.mark.spark,
    pytest.mark.spread,
    pytest.mark.timeout(1800),
    pytest.mark.usefixtures("fast_drivers"),  # tests/ops/conftest.py
]
HERE = Path(__file__).parent
PARALLEL = os.environ.get("STREAM_SINK_DRILL_PARALLEL", "2")


def drill(tmp_path: Path, *args: str) -> tuple[int, dict]:
    report = tmp_path / "report.json"
    code = main(
        [
            "drill",
            "--work-dir",
            str(tmp_path / "work"),
            "--json",
            str(report),
            "--parallel",
            PARALLEL,
            *args,
        ]
    )
    return code, json.loads(report.read_text())


SMALL_INPUT = ("--rows", "600", "--files", "3")
"""Three batches: a checkpoint of two (the default interval), then one the query's end
commits; every failpoint here lands in the first. Each batch a driver runs costs a
second or more; the rows count little."""
SPARK_FAILPOINTS = (AFTER_DATA_FILES, AFTER_STAGED_WRITE, AFTER_TABLE_COMMIT)
"""One failpoint per phase, through Spark: before the committer holds the batch, staged
but not committed, committed but not yet cleaned up. Every failpoint is killed without
Spark in tests/commit/test_crash_recovery.py (seconds each; here each costs two Spark
driver starts), and the drill's own selection of ``all`` in test_drill_report.py."""


def test_a_failpoint_per_phase_in_upsert_keeps_rows_exactly_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failpoints through Spark in upsert mode (row deltas: the mode where a batch
    boundary matters most). Append mode's kills through Spark are in
    tests/spark/test_kill.py."""
    selected = ",".join(SPARK_FAILPOINTS)
    args = ["--failpoints", selected, "--mode", "upsert", *SMALL_INPUT]
    code, report = drill(tmp_path, *args)
    out, err = capsys.readouterr()
    assert code == 0, out
    assert report["ok"] is True
    scenarios = {s["id"]: s for s in report["scenarios"]}
    assert len(scenarios) == len(SPARK_FAILPOINTS)
    for s in scenarios.values():
        assert s["verdict"] == "ok" and s["duplicated"] == s["missing"] == 0
        assert s["found_rows"] == s["expected_rows"] > 0
        assert s["readers"]["duckdb"] == s["readers"]["stream_sink"]
        assert s["reached"] is True, s["id"]
        assert s["restarts"] == 1
    assert "every row exactly once" in out
    assert "upsert/after-table-commit@1: restart 1 from the same checkpoint location" in err


def test_a_routed_drill_killed_inside_and_after_the_tables_transaction_keeps_them_agreeing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three tables of a SQL catalog (SQLite) committed in one transaction a checkpoint:
    killed with some tables' pointers moved inside it (rolled back) and after it
    committed, or the transaction committed and its answer lost (settled in the same
    run), every table holds every row exactly once for both readers, and after each
    kill every checkpoint is in all three tables or in none."""
    failpoints = f"{INSIDE_TABLES_SWAP},{AFTER_TABLES_COMMIT},{LOST_TABLES_ANSWER}@2"
    args = ["--target", "routed", "--failpoints", failpoints, "--mode", "upsert"]
    code, report = drill(tmp_path, *args, "--rows", "240", "--files", "3")
    out, err = capsys.readouterr()
    assert code == 0, out + err[-3000:]
    ids = [s["id"] for s in report["scenarios"]]
    assert ids == [
        "upsert/inside-tables-swap@2",
        "upsert/after-tables-commit@1",
        "upsert/lost-tables-answer@2",
    ]
    for s in report["scenarios"]:
        killed = s["id"] != "upsert/lost-tables-answer@2"  # the lost answer settles in the run
        assert s["verdict"] == "ok" and s["reached"] is True, s
        assert (s["kills"], s["faults"], s["restarts"]) == ((1, 0, 1) if killed else (0, 1, 0)), s
        assert s["duplicated"] == s["missing"] == s["unexpected"] == 0
        assert s["readers"]["duckdb"] == s["readers"]["stream_sink"]
        assert s["disagreements"] == [] and sorted(s["tables"]) == list(ROUTED_TABLES)
        per_table = s["expected_rows"] // len(ROUTED_TABLES)
        for readers in s["tables"].values():
            assert readers["stream_sink"] == readers["duckdb"]
            assert readers["stream_sink"]["rows"] == per_table > 0
    assert "every row exactly once" in out


def test_drill_of_a_committer_without_its_watermark_reports_duplicates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)  # the driver processes import broken_job
    code, report = drill(
        tmp_path,
        "--failpoints",
        "after-table-commit",
        "--mode",
        "append",
        "--job",
        "broken_job:run",
        "--table",
        "demo.orders",
        "--expected",
        "stream_sink.ops.drill.jobs:demo_rows",
        *SMALL_INPUT,
    )
    out, _ = capsys.readouterr()
    assert code == 1
    (scenario,) = report["scenarios"]
    assert report["ok"] is False and scenario["verdict"] == "fail"
    assert "duplicated" in scenario["problems"] and scenario["duplicated"] > 0
    assert scenario["missing"] == 0 and scenario["reached"] is True
    assert "FAIL: duplicated" in out and "1 FAILED" in out


def test_operator_mistakes_are_refused_with_their_message_and_lose_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stale state copy, a checkpoint location reused for another table, a staged data
    file taken away: each restart is refused with its message; after the repair the job
    finishes with every row exactly once."""
    code, report = drill(tmp_path, "--failpoints", "none", "--mistakes", "all", "--mode", "upsert")
    out, err = capsys.readouterr()
    assert code == 0, out + err[-3000:]
    ids = [s["id"] for s in report["scenarios"]]
    assert ids == [
        "upsert/stale-state-copy",
        "upsert/reused-checkpoint-location",
        "upsert/deleted-staged-file",
    ]
    for s in report["scenarios"]:
        assert s["verdict"] == "ok" and s["kind"] == "mistake", s
        assert s["duplicated"] == s["missing"] == 0 and s["found_rows"] == s["expected_rows"]


def test_a_positions_drill_killed_once_deletes_are_resolved_keeps_every_reader_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--deletes positions``: killed once a commit's deletes are resolved to positions
    and written (not committed), in the second commit (the batch whose keys are live in
    the table) in upsert and changelog mode; routed, once a table's deletes are resolved
    in a checkpoint of three tables, and inside their transaction. Every table is exact
    for ours, DuckDB and pyiceberg (which reads no equality deletes), and no snapshot
    lists an equality delete file (the drill checks each one and fails the scenario
    otherwise)."""
    failpoints = f"{AFTER_POSITION_DELETES}@2"
    args = ["--deletes", "positions", "--mode", "upsert,changelog", *SMALL_INPUT]
    code, report = drill(tmp_path / "one", "--failpoints", failpoints, *args)
    out, err = capsys.readouterr()
    assert code == 0, out + err[-3000:]
    routed = ["--target", "routed", "--deletes", "positions", "--mode", "upsert"]
    failpoints = f"{AFTER_POSITION_DELETES}@3,{INSIDE_TABLES_SWAP}"
    code, routed_report = drill(tmp_path / "routed", *routed, "--failpoints", failpoints)
    out, err = capsys.readouterr()
    assert code == 0, out + err[-3000:]
    ids = [s["id"] for s in report["scenarios"] + routed_report["scenarios"]]
    assert ids == [
        "upsert/after-position-deletes@2",
        "changelog/after-position-deletes@2",
        "upsert/after-position-deletes@3",
        "upsert/inside-tables-swap@2",
    ]
    for s in report["scenarios"] + routed_report["scenarios"]:
        assert s["verdict"] == "ok" and s["reached"] is True, s
        assert (s["kills"], s["restarts"]) == (1, 1), s
        assert s["duplicated"] == s["missing"] == s["unexpected"] == 0
        assert s["readers"]["pyiceberg"] == s["readers"]["stream_sink"], s
        assert s["readers"]["duckdb"] == s["readers"]["stream_sink"], s
        assert s["found_rows"] == s["expected_rows"] > 0
    assert routed_report["scenarios"][0]["disagreements"] == []


def test_a_delta_positions_drill_killed_once_vectors_are_written_keeps_every_reader_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--target delta --deletes positions``: DeltaSink killed once a commit's deletion
    vectors are written (no version yet), in upsert and changelog mode. The table is
    exact for ours, delta-rs (through its query engine, which applies the vectors) and
    DuckDB, and no version rewrote a data file (the drill fails the scenario otherwise)."""
    args = ["--target", "delta", "--deletes", "positions", "--mode", "upsert,changelog"]
    failpoints = f"{AFTER_POSITION_DELETES}@2"
    code, report = drill(tmp_path, *args, "--failpoints", failpoints, *SMALL_INPUT)
    out, err = capsys.readouterr()
    assert code == 0, out + err[-3000:]
    ids = [s["id"] for s in report["scenarios"]]
    assert ids == ["upsert/after-position-deletes@2", "changelog/after-position-deletes@2"]
    for s in report["scenarios"]:
        assert s["verdict"] == "ok" and s["reached"] is True, s
        assert (s["kills"], s["restarts"]) == (1, 1), s
        assert s["duplicated"] == s["missing"] == s["unexpected"] == 0
        assert s["readers"]["delta-rs"] == s["readers"]["stream_sink"], s
        assert s["readers"]["duckdb"] == s["readers"]["stream_sink"], s
        assert s["found_rows"] == s["expected_rows"] > 0
