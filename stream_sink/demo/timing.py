"""Where the demo's wall time goes: set-up, starting Spark, the streaming job, verification.

The demo process measures from its own start (the moment the operating system started it,
so imports count) to the end of verification. Each run of the streaming job is a child
process; the child records when its Spark session was ready (:func:`record_spark_ready`)
in a small JSON file the demo names, and the demo splits each run at that moment:

- *starting Spark*: from launching the job process to its Spark session being ready
  (Python and pyspark imports, the JVM, the session);
- *streaming job*: from then until the process ended (killed or done).

Invariants:
- The phases are disjoint intervals of the demo's wall time; ``other`` is what is left
  (polling, printing the summary), never negative.
- A run whose process never recorded a ready session (it died first) counts entirely as
  starting Spark: the job never ran.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

_IMPORTED_AT = time.time()


def process_started() -> float:
    """Epoch seconds at which this process started (Linux: from /proc; elsewhere: when
    this module was first imported, which misses only the interpreter's own start-up)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22, starttime, counted after the ")"-terminated name
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])  # /proc/stat's btime is whole seconds only
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return _IMPORTED_AT


def record_spark_ready(path: str) -> None:
    """Called by the job process once its Spark session is up: the time, in ``path``."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump({"spark_ready": time.time()}, f)


def read_spark_ready(path: str) -> float | None:
    """The time :func:`record_spark_ready` wrote to ``path``, or None (not written)."""
    try:
        with open(path) as f:
            return float(json.load(f)["spark_ready"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class JobRun:
    """One run of the job process: launched, Spark session ready (None: never), ended."""

    launched: float
    spark_ready: float | None
    ended: float

    @property
    def spark_start(self) -> float:
        ready = self.ended if self.spark_ready is None else min(self.spark_ready, self.ended)
        return max(0.0, ready - self.launched)

    @property
    def streaming(self) -> float:
        return max(0.0, self.ended - self.launched - self.spark_start)


@dataclass(frozen=True)
class DemoTimes:
    """The demo's wall time, split into phases (seconds; see the module invariants)."""

    started: float
    """Epoch seconds at which the demo process started."""
    setup_done: float
    """Input generated, earlier artefacts removed, table created."""
    verify_started: float
    ended: float
    runs: tuple[JobRun, ...] = field(default_factory=tuple)

    @property
    def total(self) -> float:
        return max(0.0, self.ended - self.started)

    @property
    def setup(self) -> float:
        return max(0.0, self.setup_done - self.started)

    @property
    def spark_start(self) -> float:
        return sum(r.spark_start for r in self.runs)

    @property
    def streaming(self) -> float:
        return sum(r.streaming for r in self.runs)

    @property
    def verification(self) -> float:
        return max(0.0, self.ended - self.verify_started)

    @property
    def other(self) -> float:
        parts = self.setup + self.spark_start + self.streaming + self.verification
        return max(0.0, self.total - parts)

    def rows(self) -> list[list[str]]:
        """The summary table's rows: phase, seconds, share of the total."""
        runs = len(self.runs)
        phases = [
            ("set-up (imports, input, table)", self.setup),
            (f"starting Spark ({runs} job run{'s' if runs != 1 else ''})", self.spark_start),
            ("streaming job", self.streaming),
            ("verification (scan and compare)", self.verification),
            ("other (polling, reporting)", self.other),
        ]
        out = [[name, f"{s:.1f}", _share(s, self.total)] for name, s in phases]
        out.append(["total wall time (from process start)", f"{self.total:.1f}", "100%"])
        return out


def _share(part: float, total: float) -> str:
    return f"{100 * part / total:.0f}%" if total > 0 else "-"
