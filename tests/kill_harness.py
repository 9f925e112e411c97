"""The one harness every kill test uses: input for a streaming job, the job in a process of
its own, killed (SIGKILL) at a failpoint or at a random moment mid-stream, restarted from
the same checkpoint location, and the checks that nothing was committed twice.

A kill test is four steps::

    batches = append_batches(files=5, rows=40)          # 1. input, one file per batch
    write_batches(root / "append-in", batches)          #    (increasing mtimes)
    job = KillJob(JOB_SCRIPT, [str(root)])              # 2. the job: a Python script
    job.killed_at("after-staged-write@2")               # 3. kills, each asserted
    job.killed_mid_stream(kill_rng(11))
    job.run_to_end()                                    #    then a run to the end
    assert_committed_once(iceberg_marks(table))          # 4. exactly once

The job script prints ``batch …`` as each micro-batch starts (so a random kill lands
while Spark runs) and ``done`` when its input is consumed. ``STREAM_SINK_FAILPOINT`` is
set only for the run that should die at it; ``STREAM_SINK_KILL_SEED`` replays another
random kill schedule.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stream_sink.ops.drill.jobs import FAST_START_JVM
from stream_sink.spark import fast_start

__all__ = [
    "KillJob",
    "append_batches",
    "assert_committed_once",
    "iceberg_marks",
    "kill_rng",
    "short_driver_submit_args",
    "upsert_batches",
    "write_batches",
]

Rows = list[dict[str, Any]]


def short_driver_submit_args() -> str:
    """How pyspark starts a killed job's driver JVM (``PYSPARK_SUBMIT_ARGS``, unless the
    environment sets it): with the drill's driver flags (the JIT's quick tier only, one GC
    thread) and Spark's classes mapped from a class data sharing archive
    (:mod:`stream_sink.spark.fast_start`). A job of a few small batches spends most of its
    CPU starting, and the optimizing JIT would compete with the other worker for the two
    cores; the archive saves the class loading every restart repeats. The archive is made
    once per installation (30-60 s), by one test process at a time (a file lock), and
    cached for the rest of the run; without one the flags alone apply."""
    return _short_driver_submit_args()


@functools.cache
def _short_driver_submit_args() -> str:
    conf = {fast_start.DRIVER_JAVA_OPTIONS: FAST_START_JVM}
    home = fast_start.archive_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "kill-jobs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        option = fast_start.java_options(conf)
    return f'--driver-java-options "{FAST_START_JVM} {option}" pyspark-shell'


def write_batches(
    directory: Path, batches: Sequence[Sequence[dict[str, Any]]], first: int = 0
) -> None:
    """Write ``batches[i]`` as ``batch-<first+i>.json`` (JSON lines), in order, with
    increasing modification times: Spark's file source takes them in that order, one
    file per micro-batch with ``maxFilesPerTrigger=1``."""
    directory.mkdir(parents=True, exist_ok=True)
    base = time.time() - 10_000
    for i, rows in enumerate(batches, start=first):
        path = directory / f"batch-{i:05d}.json"
        tmp = directory / f".batch-{i:05d}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(tmp, (base + i, base + i))
        tmp.rename(path)


def append_batches(files: int, rows: int, **columns: Any) -> list[Rows]:
    """``files`` batches of ``rows`` rows: ids 0.. in order, ``data`` naming the batch;
    each keyword adds a column, its value a function of the row's index in its batch."""
    return [
        [
            {"id": f * rows + i, "data": f"f{f}", **{k: fn(i) for k, fn in columns.items()}}
            for i in range(rows)
        ]
        for f in range(files)
    ]


def upsert_batches(
    files: int, per_file: int, keys: int, seed: int
) -> tuple[list[Rows], dict[int, str]]:
    """``files`` batches of ``per_file`` changes to ``keys`` random keys, each with an
    increasing ``seq``; and every key's last value (what an upsert table ends with)."""
    rng = random.Random(seed)
    latest: dict[int, str] = {}
    batches, seq = [], 0
    for _ in range(files):
        rows = []
        for _ in range(per_file):
            seq += 1
            key = rng.randrange(keys)
            latest[key] = f"v{seq}"
            rows.append({"id": key, "data": f"v{seq}", "seq": seq})
        batches.append(rows)
    return batches, latest


def kill_rng(default_seed: int) -> random.Random:
    """The random kill schedule: ``STREAM_SINK_KILL_SEED`` when set, else the test's own."""
    return random.Random(int(os.environ.get("STREAM_SINK_KILL_SEED", str(default_seed))))


class KillJob:
    """``python SCRIPT ARGS…`` with this interpreter (and as Spark's Python), started,
    killed and restarted by a test. ``env`` replaces the environment (default: this
    process's); ``log`` collects the job's stderr (default: discarded)."""

    def __init__(
        self,
        script: Path,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        log: Path | None = None,
        timeout: float = 1200,
    ) -> None:
        self.script, self.args, self.log, self.timeout = script, list(args), log, timeout
        self.env = dict(env if env is not None else os.environ, PYSPARK_PYTHON=sys.executable)
        self.env.pop("STREAM_SINK_FAILPOINT", None)
        if "PYSPARK_SUBMIT_ARGS" not in self.env:
            self.env["PYSPARK_SUBMIT_ARGS"] = short_driver_submit_args()

    def start(self, failpoint: str | None = None) -> subprocess.Popen[str]:
        """The job running, armed with ``failpoint`` (``<name>@<n>``) when given."""
        env = dict(self.env)
        if failpoint:
            env["STREAM_SINK_FAILPOINT"] = failpoint
        stderr: Any = subprocess.DEVNULL
        if self.log is not None:
            stderr = open(self.log, "a")  # noqa: SIM115 (the child writes it)
        try:
            return subprocess.Popen(
                [sys.executable, str(self.script), *self.args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        finally:
            if self.log is not None:
                stderr.close()

    def run(self, failpoint: str | None = None) -> tuple[int, str]:
        """One run to its end, armed with ``failpoint`` when given: its exit status
        (``-signal.SIGKILL`` when killed) and output (with the log's tail)."""
        return self.finish(self.start(failpoint))

    def finish(self, proc: subprocess.Popen[str]) -> tuple[int, str]:
        """Wait for a run ``start`` began (several can run at once): its exit status and
        output (with the log's tail)."""
        try:
            out, _ = proc.communicate(timeout=self.timeout)
        except BaseException:  # a timeout (ours or pytest's): no job left running
            _stop(proc)
            raise
        return proc.returncode, out + self._log_tail()

    def _log_tail(self) -> str:
        text = self.log.read_text() if self.log is not None and self.log.exists() else ""
        return "\n--- job log\n" + text[-3000:] if text else ""

    def killed_at(self, failpoint: str) -> str:
        """Run until the driver kills itself at ``failpoint``; its output."""
        code, out = self.run(failpoint)
        assert code == -signal.SIGKILL, f"not killed at {failpoint} (exit {code}):\n{out}"
        return out

    def failed_at(self, failpoint: str) -> str:
        """Run until ``failpoint`` kills a process the driver waits on (a Python worker
        of the Data Source route): the query fails and the job ends before ``done``."""
        code, out = self.run(failpoint)
        assert code != 0 and "done" not in out, f"ran past {failpoint} (exit {code}):\n{out}"
        return out

    def killed_mid_stream(
        self, rng: random.Random, delay: tuple[float, float] = (0.0, 4.0), **start: Any
    ) -> None:
        """Start the job, wait for its first ``batch`` line, then SIGKILL it after a random
        delay (unless it has finished by then)."""
        proc = self.start(**start)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if line.startswith("batch"):
                    break
            time.sleep(rng.uniform(*delay))
        finally:
            _stop(proc)

    def run_to_end(self) -> str:
        """Run without a failpoint until the input is consumed; its output."""
        code, out = self.run()
        assert code == 0 and "done" in out, f"the last run failed (exit {code}):\n{out}"
        return out


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the job unless it has ended, and reap it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=300)
    if proc.stdout is not None:
        proc.stdout.close()


def iceberg_marks(table: Any) -> list[int]:
    """The sink's batch watermark of each snapshot of an Iceberg table, oldest first."""
    return [int(s.summary["stream-sink.max-committed-checkpoint-id"]) for s in table.snapshots()]


def assert_committed_once(marks: Iterable[int | None], what: str = "") -> None:
    """Watermarks of successive commits strictly increase: no batch committed twice."""
    marks = list(marks)
    assert None not in marks, f"{what}: a commit without a watermark: {marks}"
    assert marks == sorted(set(marks)), f"{what}: a batch was committed twice: {marks}"
