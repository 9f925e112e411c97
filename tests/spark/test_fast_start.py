"""``local_session(fast_start=True)``: the driver JVM maps Spark's classes from a class
archive, made once by a training run; a missing, failed or partial archive never stops
or slows a start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stream_sink.spark import fast_start
from stream_sink.spark.fast_start import (
    ARCHIVE_HOME,
    DRIVER_JAVA_OPTIONS,
    archive_path,
    create_archive,
    java_options,
    with_fast_start,
)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "jvm"
    monkeypatch.setenv(ARCHIVE_HOME, str(where))
    return where


def test_an_archive_is_named_after_the_class_path_and_the_driver_flags(home: Path) -> None:
    plain = archive_path()
    assert plain.parent == home and plain.name.endswith(".jsa")
    assert archive_path({"spark.driver.memory": "4g"}) == plain  # not a JVM shape
    assert archive_path({"spark.driver.extraClassPath": "/x.jar"}) != plain
    assert archive_path({DRIVER_JAVA_OPTIONS: "-Xss4m"}) != plain


def test_an_existing_archive_is_mapped_after_the_callers_own_options(home: Path) -> None:
    conf = {DRIVER_JAVA_OPTIONS: "-Xss4m", "spark.driver.memory": "2g"}
    path = archive_path(conf)
    home.mkdir()
    path.write_bytes(b"archive")
    assert with_fast_start(conf) == {
        DRIVER_JAVA_OPTIONS: f"-Xss4m -XX:SharedArchiveFile={path}",
        "spark.driver.memory": "2g",
    }


def test_a_failed_training_run_is_recorded_and_not_retried(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[list[str]] = []
    real_run = subprocess.run

    def run(cmd: list[str], **kwargs: object) -> object:
        runs.append(cmd)
        return real_run([sys.executable, "-c", "raise SystemExit(3)"], **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(fast_start.subprocess, "run", run)
    assert create_archive() is None
    failed = archive_path().with_suffix(".failed")
    assert "exit status 3" in failed.read_text()
    assert java_options() == ""  # no archive, and no second training run
    assert with_fast_start({}) == {}
    assert len(runs) == 1
    failed.unlink()
    java_options()
    assert len(runs) == 2  # removing the record tries again


def test_an_unwritable_archive_home_leaves_the_start_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(ARCHIVE_HOME, str(blocker / "jvm"))  # cannot be made
    conf = {DRIVER_JAVA_OPTIONS: "-Xss4m"}
    assert with_fast_start(conf) == conf


def test_partial_archives_of_finished_runs_are_removed(home: Path) -> None:
    path = archive_path()
    home.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    abandoned = path.with_name(f"{path.name}.{gone.stdout.strip()}.part")
    running = path.with_name(f"{path.name}.{os.getpid()}.part")
    abandoned.write_bytes(b"half")
    running.write_bytes(b"half")
    fast_start._remove_abandoned(path)
    assert not abandoned.exists() and running.exists()


@pytest.mark.slow
def test_a_training_run_makes_an_archive_the_next_driver_maps(tmp_path: Path, home: Path) -> None:
    """Two drivers with ``fast_start=True``: the first makes the archive (its JVM exits
    whole before the rename), the second's JVM loads Spark's classes from it."""
    loads = tmp_path / "classes.log"
    job = f"""
import sys
from stream_sink.spark import local_session
spark = local_session("fast", fast_start=True,
                      conf={{"{DRIVER_JAVA_OPTIONS}": "-Xlog:class+load=info:file={loads}"}})
print(spark.range(3).count())
"""
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", job], capture_output=True, text=True, timeout=600, cwd=tmp_path
        )
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.split()[-1] == "3"
    (archive,) = home.glob("*.jsa")
    assert not list(home.glob("*.part"))
    mapped = [ln for ln in loads.read_text().splitlines() if "shared objects file (top)" in ln]
    assert any("org.apache.spark.SparkContext " in line for line in mapped)
    assert archive.stat().st_size > 10_000_000
