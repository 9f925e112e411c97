"""Operator mistakes in the restart drill: each is refused with a message, nothing lost.

- ``stale-state-copy``: the state directory is replaced by an older copy (taken after
  the first checkpoint committed) while a later batch, acknowledged by Spark, was only
  pending in the newer state. The restart must refuse (DataLossError naming a stale
  copy); with the newest state put back, the job finishes exactly once.
- ``reused-checkpoint-location``: the same checkpoint location and state (and so the
  same sink id) are started for another table (same name, another warehouse) while
  batches are pending. The start must refuse (TableMismatchError: the checkpoint
  location belongs to another table) and write nothing there; back on its own table,
  the job finishes exactly once.
- ``deleted-staged-file``: a data file of a staged, not yet committed checkpoint is
  taken away. The restart must refuse (MissingFileError naming the file) and leave the
  table untouched; with the file put back, the job finishes exactly once.

Each step is one driver process (:mod:`.child`); the mistake happens between
processes, as an operator's would.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stream_sink.exceptions import InvalidOptionError

MISTAKES = ("stale-state-copy", "reused-checkpoint-location", "deleted-staged-file")
KILLED = -9


def mistake_names(selection: str) -> tuple[str, ...]:
    """``all``, ``none`` or ``NAME,...``."""
    text = selection.strip()
    if text in ("", "none"):
        return ()
    names = MISTAKES if text == "all" else tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [n for n in names if n not in MISTAKES]
    if unknown:
        raise InvalidOptionError(f"--mistakes: unknown {unknown}; known: {', '.join(MISTAKES)}")
    return names


@dataclass
class MistakeRun:
    """Drives one mistake scenario's driver processes and records what they did."""

    job: str
    context: dict[str, Any]
    timeout_s: float
    say: Callable[[str], None]
    name: str
    prepare: Callable[..., Any] | None = None
    runs: int = 0
    kills: int = 0
    logs: list[str] = field(default_factory=list)

    def run(self, failpoint: str | None = None, **overrides: Any) -> tuple[int, str]:
        """One driver process over one job run; (exit status, its log)."""
        self.runs += 1
        base = os.path.join(self.context["work_dir"], f"mistake-run-{self.runs}")
        plan, status, log = base + ".plan.json", base + ".status", base + ".log"
        context = {**self.context, **overrides}
        with open(plan, "w") as f:
            json.dump(
                {
                    "job": self.job,
                    "steps": [{"step": 0, "context": context, "failpoint": failpoint}],
                },
                f,
            )
        open(status, "w").close()
        env = dict(os.environ)
        env.pop("STREAM_SINK_FAILPOINT", None)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "stream_sink.ops.drill.child", plan, status],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            try:
                code = proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                from stream_sink.ops.drill.run import _kill_group

                _kill_group(proc)
        self.logs.append(log)
        if code == KILLED:
            self.kills += 1
        with open(log, errors="replace") as f:
            text = f.read()
        self.say(f"{self.name}: run {self.runs} ended with status {code}")
        return (code if code is not None else 124), text


def _refused(outcome: tuple[int, str], error: str, phrase: str) -> str | None:
    """None when the run failed with ``error`` saying ``phrase``; else why not."""
    code, text = outcome
    if code != 1 or f"{error}:" not in text or phrase not in text:
        return f"expected {error} saying {phrase!r}, got exit status {code}"
    return None


def stale_state_copy(m: MistakeRun) -> str | None:
    state = m.context["state_dir"]
    m.run("after-state-cleanup@1")  # the first checkpoint committed, then killed
    shutil.copytree(state, state + ".stale")
    m.run("after-data-files@3")  # batch 1 again (replay), batch 2 pending, killed in 3
    shutil.move(state, state + ".newest")
    shutil.move(state + ".stale", state)
    why = _refused(m.run(), "DataLossError", "stale copy")
    shutil.rmtree(state)
    shutil.move(state + ".newest", state)  # the operator puts the newest state back
    return why or _finished(m.run())


def reused_checkpoint_location(m: MistakeRun) -> str | None:
    m.run("after-data-files@4")  # batches 0-1 committed, 2 pending, killed in batch 3
    other = m.context["warehouse"] + "-other-table"
    _prepare_other(m, other)
    why = _refused(m.run(warehouse=other), "TableMismatchError", "belongs to another table")
    return why or _untouched(other, m) or _finished(m.run())


def deleted_staged_file(m: MistakeRun) -> str | None:
    m.run("after-checkpoint-metadata@1")  # checkpoint 1 staged and complete, not committed
    data = sorted(
        glob.glob(os.path.join(m.context["warehouse"], "**", "*.parquet"), recursive=True),
        key=os.path.getmtime,
    )
    if not data:
        return "no staged data file found to take away"
    aside = data[0] + ".aside"
    shutil.move(data[0], aside)
    why = _refused(m.run(), "MissingFileError", os.path.basename(data[0]))
    shutil.move(aside, data[0])  # the operator puts the file back
    return why or _finished(m.run())


def _finished(outcome: tuple[int, str]) -> str | None:
    code, _ = outcome
    return None if code == 0 else f"the run after the repair exited with status {code}"


def _prepare_other(m: MistakeRun, warehouse: str) -> None:
    if m.prepare is not None:
        m.prepare(**{**m.context, "warehouse": warehouse})


def _untouched(warehouse: str, m: MistakeRun) -> str | None:
    data = glob.glob(os.path.join(warehouse, "**", "*.parquet"), recursive=True)
    return f"the other table got {len(data)} data files" if data else None


SCENARIOS: dict[str, Callable[[MistakeRun], str | None]] = {
    "stale-state-copy": stale_state_copy,
    "reused-checkpoint-location": reused_checkpoint_location,
    "deleted-staged-file": deleted_staged_file,
}


def run_mistake(name: str, m: MistakeRun) -> tuple[str | None, float]:
    """(why it failed or None, seconds)."""
    started = time.monotonic()
    why = SCENARIOS[name](m)
    return why, time.monotonic() - started
