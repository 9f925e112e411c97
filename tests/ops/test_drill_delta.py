"""The drill verifies a Delta table (``--table delta:PATH``) with stream_sink's reader,
delta-rs and DuckDB's delta extension, and drills the demo pipeline into a Delta table
(``--target delta``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from stream_sink.cli.drill import add_arguments, options_from_args
from stream_sink.cli.main import main
from stream_sink.delta import DeltaTable
from stream_sink.exceptions import InvalidOptionError
from stream_sink.ops.drill.jobs import JobSpec
from stream_sink.ops.drill.run import verify

EXPECTED = pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]})


def expected_rows(**context: Any) -> pa.Table:
    return EXPECTED


def test_drill_reads_a_delta_table_by_path_with_both_readers(tmp_path: Path) -> None:
    table = DeltaTable.create(str(tmp_path / "lake" / "t"), EXPECTED.schema)
    table.append(EXPECTED)
    table.append(EXPECTED.slice(1, 1))  # id 2 twice: a duplicate both readers must see
    context = {"work_dir": str(tmp_path), "warehouse": str(tmp_path / "warehouse")}
    job = JobSpec("m:run", "delta:lake/t", "m:rows")
    expected, readers = verify(job, context, expected_rows)
    assert expected == 3
    for name in ("stream_sink", "delta-rs", "duckdb"):
        counts = readers[name]
        assert counts is not None, name
        assert (counts.rows, counts.duplicated, counts.missing) == (4, 1, 0), name


@pytest.mark.spark
@pytest.mark.timeout(1200)
@pytest.mark.usefixtures("fast_drivers")  # tests/ops/conftest.py
def test_drill_of_the_demo_into_delta_keeps_rows_exactly_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--target delta``: the demo pipeline into a Delta table, killed once the version
    is committed and before the state is cleaned up, restarted, and read back by all
    three readers. (Every failpoint is killed through DeltaSink in the Spark kill test
    and without Spark in the committer's crash tests; the drill adds the CLI around it.)"""
    report_path = tmp_path / "report.json"
    failpoints = "after-table-commit"
    args = ["drill", "--target", "delta", "--failpoints", failpoints, "--mode", "upsert"]
    args += ["--rows", "300", "--files", "3", "--work-dir", str(tmp_path / "work")]
    code = main([*args, "--json", str(report_path)])
    out, err = capsys.readouterr()
    assert code == 0, out
    report = json.loads(report_path.read_text())
    assert report["ok"] is True and report["table"] == "delta:lake/orders"
    assert len(report["scenarios"]) == 1
    for s in report["scenarios"]:
        assert s["verdict"] == "ok" and s["reached"] is True and s["restarts"] == 1, s["id"]
        assert s["found_rows"] == s["expected_rows"] > 0
        readers = s["readers"]
        assert readers["delta-rs"] == readers["duckdb"] == readers["stream_sink"], s["id"]
    lake = tmp_path / "work" / "upsert_after-table-commit-1" / "lake" / "orders"
    assert DeltaTable.is_delta_table(str(lake))
    assert "every row exactly once" in out
    assert "upsert/after-table-commit@1: restart 1 from the same checkpoint location" in err


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p


def test_drill_target_is_checked_against_its_other_options() -> None:
    for args, error in (
        (["--target", "delta", "--mistakes", "all"], "--mistakes drills the Iceberg demo only"),
        (
            ["--target", "delta", "--job", "m:run", "--table", "t", "--expected", "m:rows"],
            "--target chooses the built-in demo's table",
        ),
    ):
        with pytest.raises(InvalidOptionError, match=error):
            options_from_args(parser().parse_args(args))
