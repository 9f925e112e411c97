"""What a drill does: its scenarios (a failpoint or random kills, in one mode) and the
runs (steps) each one needs.

Invariants:
- A scenario's first run is armed: with its failpoint (``STREAM_SINK_FAILPOINT``), or
  with its first random kill delay. Run ``k`` > 0 carries kill delay ``k`` when there is
  one, else nothing: the scenario ends with the first run that finishes (its input
  consumed), whether or not the planned kills landed.
- Scenarios come from a :class:`ScenarioSource` in a fixed order for a seed; a soak
  source keeps producing random-kill scenarios until its deadline.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stream_sink.commit.failpoints import (
    AFTER_DATA_FILES,
    AFTER_PENDING_WRITE,
    AFTER_POSITION_DELETES,
    FAILPOINTS,
    INSIDE_TABLES_SWAP,
    MULTI_TABLE_FAILPOINTS,
)
from stream_sink.exceptions import InvalidOptionError

DEFAULT_HITS = {AFTER_DATA_FILES: 2, AFTER_PENDING_WRITE: 2, INSIDE_TABLES_SWAP: 2}
"""Per-batch failpoints fire on the second batch (a kill mid-stream, not at the start);
``inside-tables-swap`` on its second hit, with some tables' pointers moved inside the
transaction and not the others; the others on their first hit, inside the first
checkpoint."""
KNOWN = FAILPOINTS + MULTI_TABLE_FAILPOINTS + (AFTER_POSITION_DELETES,)
"""Every failpoint ``--failpoints`` names: the commit protocol's in its order, the
multi-table commit's, and the step ``--deletes positions`` adds."""
SOAK_KILLS = (1, 3)
"""Random kills per soak scenario (inclusive range)."""


@dataclass(frozen=True)
class Scenario:
    id: str
    mode: str
    kind: str
    """failpoint | random-kill | soak"""
    failpoint: str | None = None
    """``<name>@<n>``: the value of STREAM_SINK_FAILPOINT in the first run."""
    kill_delays: tuple[float, ...] = ()
    """Seconds after the first micro-batch of run k starts at which the drill SIGKILLs it
    (no kill when the run starts no micro-batch)."""

    def kill_delay(self, run: int) -> float | None:
        return self.kill_delays[run] if run < len(self.kill_delays) else None

    def armed_failpoint(self, run: int) -> str | None:
        return self.failpoint if run == 0 else None

    @property
    def moment(self) -> str:
        """The kill moment as shown in the drill's table."""
        if self.failpoint:
            return self.failpoint
        return "random kill at " + ", ".join(f"{d:.1f}s" for d in self.kill_delays)


def failpoint_specs(
    selection: str,
    unreachable: Mapping[str, str] | None = None,
    job: str = "the job",
    every: Sequence[str] = FAILPOINTS,
) -> tuple[str, ...]:
    """``all`` or ``NAME[@N],...`` as ``name@n`` specs, in protocol order for ``all``.

    ``all`` is ``every`` (default: the commit protocol's failpoints) but the ones ``job``
    never reaches (``unreachable``, each with why); naming one of those is refused
    (InvalidOptionError). A failpoint the job may reach but does not is reported
    ``reached: false`` after the run instead."""
    never = dict(unreachable or {})
    if selection.strip() in ("", "none"):
        return ()
    if selection.strip() == "all":
        names: Sequence[str] = [n for n in every if n not in never]
    else:
        names = selection.split(",")
    specs = []
    for part in (p.strip() for p in names):
        name, _, count = part.partition("@")
        if name not in KNOWN:
            raise InvalidOptionError(
                f"--failpoints: unknown failpoint {name!r}; known: {', '.join(KNOWN)}"
            )
        if name in never:
            raise InvalidOptionError(
                f"--failpoints: {job} never reaches {name!r} ({never[name]}); drop it from "
                f"--failpoints, or choose from: {', '.join(n for n in KNOWN if n not in never)}"
            )
        if count and (not count.isdigit() or int(count) < 1):
            raise InvalidOptionError(f"--failpoints: {part!r} must be NAME or NAME@<n ≥ 1>")
        specs.append(f"{name}@{count or DEFAULT_HITS.get(name, 1)}")
    return tuple(specs)


def plan_scenarios(
    modes: Sequence[str],
    failpoints: Sequence[str],
    random_kills: int,
    rng: random.Random,
    max_delay_s: float,
) -> list[Scenario]:
    """Every failpoint, then ``random_kills`` random kills, in each mode (mode-major)."""
    out = []
    for mode in modes:
        out += [Scenario(f"{mode}/{fp}", mode, "failpoint", failpoint=fp) for fp in failpoints]
        for i in range(random_kills):
            delay = round(rng.uniform(0.5, max_delay_s), 1)
            out.append(
                Scenario(f"{mode}/random-kill-{i + 1}", mode, "random-kill", kill_delays=(delay,))
            )
    return out


@dataclass
class ScenarioSource:
    """Hands out scenarios to the drill's chains (thread-safe); after the planned ones, a
    soak keeps adding random-kill scenarios, modes in turn, for ``soak_s`` seconds from the
    first one it hands out."""

    planned: list[Scenario]
    modes: tuple[str, ...]
    rng: random.Random
    max_delay_s: float
    soak_s: float = 0.0
    handed: list[Scenario] = field(default_factory=list)
    soak_until: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self, soak: bool = True) -> Scenario | None:
        """The next scenario; with ``soak`` False, only a planned one (a chain looking
        ahead must not take soak scenarios it would start after the deadline)."""
        with self._lock:
            if len(self.handed) < len(self.planned):
                scenario = self.planned[len(self.handed)]
            elif soak and self.soak_s > 0 and self._soaking():
                scenario = self._soak(len(self.handed) - len(self.planned))
            else:
                return None
            self.handed.append(scenario)
            return scenario

    def _soaking(self) -> bool:
        if self.soak_until is None:
            self.soak_until = time.monotonic() + self.soak_s
        return time.monotonic() < self.soak_until

    def _soak(self, i: int) -> Scenario:
        mode = self.modes[i % len(self.modes)]
        kills = self.rng.randint(*SOAK_KILLS)
        delays = tuple(round(self.rng.uniform(0.5, self.max_delay_s), 1) for _ in range(kills))
        return Scenario(f"{mode}/soak-{i + 1}", mode, "soak", kill_delays=delays)
