"""The demo's closing wall-time summary: which phases it names (not how long they took)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from stream_sink.cli.demo import _time_summary
from stream_sink.demo.timing import (
    DemoTimes,
    JobRun,
    process_started,
    read_spark_ready,
    record_spark_ready,
)

PHASES = (
    "set-up",
    "starting Spark",
    "streaming job",
    "verification",
    "total wall time (from process start)",
)


def _killed_and_restarted() -> DemoTimes:
    killed = JobRun(launched=110.0, spark_ready=140.0, ended=170.0)
    restarted = JobRun(launched=171.0, spark_ready=200.0, ended=230.0)
    return DemoTimes(100.0, 110.0, 231.0, 236.0, (killed, restarted))


def test_the_summary_names_every_phase_with_seconds_and_share() -> None:
    text = _time_summary(_killed_and_restarted())
    assert "Wall time of this demo" in text
    for phase in PHASES:
        line = next(ln for ln in text.splitlines() if phase in ln)
        seconds, share = line.split()[-2:]
        float(seconds)
        assert share.endswith("%"), line
    assert "starting Spark (2 job runs)" in text


def test_phases_split_the_wall_time_without_overlap() -> None:
    t = _killed_and_restarted()
    assert (t.setup, t.spark_start, t.streaming, t.verification) == (10, 59, 60, 5)
    assert t.setup + t.spark_start + t.streaming + t.verification + t.other == t.total == 136


def test_a_job_that_died_before_its_session_was_ready_counts_as_starting_spark() -> None:
    died = JobRun(launched=10.0, spark_ready=None, ended=25.0)
    assert (died.spark_start, died.streaming) == (15.0, 0.0)


def test_the_ready_time_travels_through_its_file(tmp_path: Path) -> None:
    path = str(tmp_path / "logs" / "job-run-1.spark-ready.json")
    assert read_spark_ready(path) is None
    before = time.time()
    record_spark_ready(path)
    ready = read_spark_ready(path)
    assert ready is not None and before <= ready <= time.time()


def test_process_start_is_when_the_process_started() -> None:
    """A child that sleeps before asking sees its start well before the question."""
    launched = time.time()
    code = (
        "import time; time.sleep(1.0); "
        "from stream_sink.demo.timing import process_started; print(process_started())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    started = float(out.stdout)
    assert launched - 0.1 <= started <= launched + 0.9
    assert process_started() <= launched
