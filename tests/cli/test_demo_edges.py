"""`stream-sink demo` at its edges: arguments checked before anything is touched, and the
kill report naming what the table held when the job died."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from stream_sink.cli.demo import WATERMARK, _watch_job, run_demo
from stream_sink.cli.main import main
from stream_sink.commit.iceberg.watermark import OPERATOR_ID
from stream_sink.demo.job import SINK_ID, TABLE, DemoConfig, open_catalog
from stream_sink.exceptions import InvalidOptionError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--files", "0"], "argument --files: must be at least 1, got 0"),
        (["--rows", "-5"], "argument --rows: must be at least 1, got -5"),
        (["--rows", "many"], "argument --rows: expected a whole number, got 'many'"),
    ],
)
def test_bad_sizes_are_refused_by_the_command_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["demo", *args])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bad_sizes_leave_an_earlier_demo_untouched(tmp_path: Path) -> None:
    cfg = DemoConfig(
        warehouse=str(tmp_path / "wh"),
        checkpoint_location=str(tmp_path / "chk"),
        input=str(tmp_path / "in"),
    )
    catalog = open_catalog(cfg)
    catalog.create_namespace("demo")
    catalog.create_table(TABLE, pa.schema([("id", pa.int64())]))
    (tmp_path / "chk").mkdir()
    for rows, files, text in [
        (-5, 4, "at least one change event in at least one file"),
        (100, 0, "at least one change event in at least one file"),
        (3, 4, "--files 4 is more than --rows 3"),
    ]:
        with pytest.raises(InvalidOptionError, match=text):
            run_demo(rows=rows, files=files, config=cfg)
    assert catalog.table_exists(TABLE) and (tmp_path / "chk").is_dir()


@pytest.mark.slow
def test_the_entry_script_refuses_bad_sizes_in_one_line() -> None:
    """What a newcomer types: ``scripts/run.sh demo`` (``make demo``) with a bad size."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "run.sh"), "demo", "--files", "0"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stderr
    assert "argument --files: must be at least 1, got 0" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


FAKE_JOB = """
import sys
import pyarrow as pa
import stream_sink as ss

table = ss.load_catalog("demo", type="hadoop", warehouse=sys.argv[1]).load_table(sys.argv[2])
sink = {sys.argv[4]: sys.argv[5]}  # the demo's sink id, as the sink stamps it
for batch in range(100_000):  # commits as fast as it can until it is killed
    table.append(pa.table({"id": [batch]}), snapshot_properties={sys.argv[3]: str(batch), **sink})
"""


@pytest.mark.slow
def test_the_kill_report_names_what_the_table_held_when_the_job_died(tmp_path: Path) -> None:
    """The job keeps committing between the moment the demo decides to kill it and the
    moment the signal lands: the report names the table's watermark after the kill."""
    cfg = DemoConfig(warehouse=str(tmp_path / "wh"))
    catalog = open_catalog(cfg)
    catalog.create_namespace("demo")
    catalog.create_table(TABLE, pa.schema([("id", pa.int64())]))
    script = tmp_path / "job.py"
    script.write_text(FAKE_JOB)
    said: list[str] = []
    outcome = _watch_job(
        cfg,
        catalog,
        100_000,
        2,
        said.append,
        str(tmp_path / "job.log"),
        str(tmp_path / "ready.json"),
        command=[
            sys.executable,
            str(script),
            cfg.warehouse,
            TABLE,
            WATERMARK,
            OPERATOR_ID,
            SINK_ID,
        ],
    )
    assert outcome == "killed"
    marks = [int(s.summary[WATERMARK]) for s in catalog.load_table(TABLE).snapshots()]
    held = max(marks)
    assert marks == list(range(held + 1)) and held >= 2
    assert said[-1] == (
        "killed the job with SIGKILL; when it died the table held batches "
        f"0..{held} (its watermark: batch {held})"
    )
    reported = [int(line.split()[1]) for line in said if line.startswith("batch ")]
    assert reported == marks  # every commit is reported, those after the decision too
