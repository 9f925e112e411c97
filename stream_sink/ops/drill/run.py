"""The restart/recovery drill: run a streaming job, SIGKILL its driver at every failpoint
and at random moments, restart it from the same checkpoint location until its input is
consumed, then compare the table with the expected rows (``stream-sink drill``).

How it runs:
- Each scenario (:mod:`.scenarios`) has its own directory under the work dir:
  warehouse, checkpoint location and state; every scenario reads the same input.
- Driver processes (:mod:`.child`) run a plan of steps: the next run of the
  scenario in progress, then the first (armed) runs of the scenarios after it. A kill
  ends the process; the next one starts with the killed scenario's restart. One JVM
  start per kill, not per run: starting Spark is most of a restart's cost.
- The drill kills the driver's whole process group with SIGKILL (the driver and its
  JVM) for a random kill; a failpoint kills the driver itself, and the drill then kills
  what is left of its group.
- When a scenario's run finishes, the table is read with the project's reader and with
  DuckDB (when installed) and compared with ``expected(**context)``
  (:mod:`.report`); a job writing several tables has each of them compared, and the
  tables' checkpoints compared with each other after every kill and at the end
  (:mod:`.agreement`). A driver that fails (exit status other than SIGKILL) fails
  its scenario ("job-failed"); the other scenarios go on.
- ``parallel`` > 1 runs that many chains of driver processes at once.

Progress goes to ``progress`` (stderr from the command line), one line per run, kill,
restart and verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO

import pyarrow as pa

from stream_sink.delta import DeltaTable
from stream_sink.ops import duckdb_reader
from stream_sink.ops.drill.agreement import check_agreement
from stream_sink.ops.drill.delete_files import (
    delta_rewrite_versions,
    equality_delete_snapshots,
    pyiceberg_read,
)
from stream_sink.ops.drill.jobs import (
    CATALOG_ENV,
    DELTA_PREFIX,
    JobSpec,
    open_scenario_catalog,
    resolve,
    scenario_table,
)
from stream_sink.ops.drill.mistakes import MistakeRun, run_mistake
from stream_sink.ops.drill.report import (
    PRIMARY_READER,
    DrillReport,
    RowCounts,
    ScenarioResult,
    compare,
    summed,
)
from stream_sink.ops.drill.scenarios import Scenario, ScenarioSource, plan_scenarios

POLL_S = 0.1
PLAN_AHEAD = 4
"""Scenarios one driver process is given at a time (the one in progress included)."""
_PREPARE_LOCK = threading.Lock()
EXTRA_RUNS = 3
"""Runs a scenario may take beyond one per planned kill before it is declared stuck."""


@dataclass(frozen=True)
class DrillOptions:
    job: JobSpec
    modes: tuple[str, ...] = ("upsert",)
    failpoints: tuple[str, ...] = ()
    random_kills: int = 0
    seed: int = 7
    soak_minutes: float = 0.0
    work_dir: str | None = None
    rows: int = 1600
    files: int = 4
    checkpoint_interval_batches: int = 2
    max_kill_delay_s: float = 8.0
    parallel: int = 1
    run_timeout_s: float = 900.0
    mistakes: tuple[str, ...] = ()
    """Operator mistakes to drill in each mode (:mod:`.mistakes`), after the kills."""
    catalog: Mapping[str, str] | None = None
    """``load_catalog`` keyword arguments (``type="rest"``, ``uri``, ...) of a catalog every
    scenario's table lives in, each in a namespace of its own; None: a Hadoop catalog in
    each scenario's directory. Reaches the job's processes in the environment only."""


def run_drill(options: DrillOptions, progress: TextIO | None = None) -> DrillReport:
    """Run every scenario of ``options``; the report says which ones lost or duplicated.
    Progress lines go to ``progress`` (default: stderr)."""
    with _catalog_environment(options.catalog):
        return _run_drill(options, progress)


@contextlib.contextmanager
def _catalog_environment(catalog: Mapping[str, str] | None) -> Iterator[None]:
    """The drill's catalog in this process's environment (read by the job's entry points
    here and inherited by its driver processes), for the drill's duration."""
    before = os.environ.get(CATALOG_ENV)
    if catalog is None:
        os.environ.pop(CATALOG_ENV, None)
    else:
        os.environ[CATALOG_ENV] = json.dumps(dict(catalog))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CATALOG_ENV, None)
        else:
            os.environ[CATALOG_ENV] = before


def _run_drill(options: DrillOptions, progress: TextIO | None) -> DrillReport:
    started_wall, started = time.time(), time.monotonic()
    work = options.work_dir or tempfile.mkdtemp(prefix="stream-sink-drill-")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(options.seed)
    planned = plan_scenarios(
        options.modes, options.failpoints, options.random_kills, rng, options.max_kill_delay_s
    )
    soak_s = max(0.0, options.soak_minutes * 60)
    source = ScenarioSource(planned, options.modes, rng, options.max_kill_delay_s, soak_s)
    say = _Progress(progress or sys.stderr, started)
    soak = f" then a {options.soak_minutes:g}-minute soak" if soak_s else ""
    say(
        f"drill of {options.job.job} into {options.job.table}: {len(planned)} scenarios"
        f"{soak}; work dir {work}"
    )
    results: list[ScenarioResult] = []
    chains = [
        _Chain(i, options, work, source, say, results) for i in range(max(1, options.parallel))
    ]
    threads = [
        threading.Thread(target=c.run, name=f"drill-chain-{c.index}", daemon=True) for c in chains
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C: no driver process outlives the drill
        for c in chains:
            c.stop()
        raise
    order = {s.id: i for i, s in enumerate(source.handed)}
    results.sort(key=lambda r: order.get(r.id, len(order)))
    mistakes = [(mode, name) for mode in options.modes for name in options.mistakes]
    if mistakes:  # each in its own directory: ``parallel`` of them at once
        with ThreadPoolExecutor(max(1, options.parallel), "drill-mistake") as pool:
            results.extend(pool.map(lambda m: _mistake(options, work, m[0], m[1], say), mistakes))
    return DrillReport(
        options.job.job,
        options.job.table,
        options.seed,
        work,
        started_wall,
        time.monotonic() - started,
        tuple(results),
    )


def _mistake(
    options: DrillOptions, work: str, mode: str, name: str, say: _Progress
) -> ScenarioResult:
    """One operator-mistake scenario (:mod:`.mistakes`), verified like the others."""
    scenario = Scenario(f"{mode}/{name}", mode, "mistake")
    context = scenario_context(options, work, scenario)
    os.makedirs(context["work_dir"], exist_ok=True)
    prepare = resolve(options.job.prepare, "prepare") if options.job.prepare else None
    if prepare is not None:
        with _PREPARE_LOCK:  # scenarios share the input the first prepare writes
            prepare(**context)
    say(f"{scenario.id}: started")
    m = MistakeRun(options.job.job, context, options.run_timeout_s, say, scenario.id, prepare)
    error, took = run_mistake(name, m)
    readers: dict[str, RowCounts | None] = {}
    expected_rows = 0
    try:
        expected_rows, readers = verify(
            options.job, context, resolve(options.job.expected, "--expected")
        )
    except Exception as e:
        error = error or f"reading or comparing the table failed: {type(e).__name__}: {e}"
    result = ScenarioResult(
        id=scenario.id,
        mode=mode,
        kind="mistake",
        failpoint=None,
        kill_delays_s=(),
        kills=m.kills,
        restarts=max(0, m.runs - 1),
        expected_rows=expected_rows,
        readers=readers,
        error=error,
        duration_s=took,
        logs=tuple(m.logs),
    )
    say(f"{scenario.id}: {describe(result)}")
    return result


def scenario_context(options: DrillOptions, work: str, scenario: Scenario) -> dict[str, Any]:
    """The keyword arguments the job's entry points get (see :mod:`.jobs`)."""
    root = os.path.join(work, scenario.id.replace("/", "_").replace("@", "-"))
    return {
        "work_dir": root,
        "warehouse": os.path.join(root, "warehouse"),
        "checkpoint_location": os.path.join(root, "checkpoints"),
        "state_dir": os.path.join(root, "state"),
        "input_dir": os.path.join(work, "input"),
        "mode": scenario.mode,
        "seed": options.seed,
        "rows": options.rows,
        "files": options.files,
        "checkpoint_interval_batches": options.checkpoint_interval_batches,
        "deletes": options.job.deletes,
        "namespace": "drill_" + hashlib.sha1(root.encode()).hexdigest()[:12],
    }


@dataclass
class _Tracked:
    """A scenario in progress: how many runs it started, how many were killed."""

    scenario: Scenario
    context: dict[str, Any]
    started: float
    runs: int = 0
    kills: int = 0
    faults: int = 0
    logs: list[str] = field(default_factory=list)
    error: str | None = None
    disagreements: list[str] = field(default_factory=list)

    def next_step(self, step: int) -> dict[str, Any]:
        return {
            "step": step,
            "context": self.context,
            "failpoint": self.scenario.armed_failpoint(self.runs),
        }

    @property
    def stuck(self) -> bool:
        return self.runs >= len(self.scenario.kill_delays) + 1 + EXTRA_RUNS


@dataclass
class _Outcome:
    """What one driver process did: steps it finished, the step it was in when it ended,
    and how it ended."""

    done: list[int] = field(default_factory=list)
    current: int | None = None
    returncode: int = 0
    timed_out: bool = False
    lines_read: int = 0


class _Chain:
    """Runs scenarios one after another through a sequence of driver processes."""

    def __init__(
        self,
        index: int,
        options: DrillOptions,
        work: str,
        source: ScenarioSource,
        say: _Progress,
        results: list[ScenarioResult],
    ) -> None:
        self.index, self.options, self.work = index, options, work
        self.source, self.say, self.results = source, say, results
        self.processes = 0
        self.live: subprocess.Popen[bytes] | None = None
        self.stopped = False
        self.prepare = resolve(options.job.prepare, "prepare") if options.job.prepare else None
        self.expected = resolve(options.job.expected, "--expected")

    def stop(self) -> None:
        self.stopped = True
        if self.live is not None:
            _kill_group(self.live)

    def run(self) -> None:
        pending: list[_Tracked] = []
        while not self.stopped:
            while len(pending) < PLAN_AHEAD:
                scenario = self.source.next(soak=not pending)
                if scenario is None:
                    break
                pending.append(self._track(scenario))
            if not pending:
                return
            pending = self._drive(pending)

    def _track(self, scenario: Scenario) -> _Tracked:
        context = scenario_context(self.options, self.work, scenario)
        os.makedirs(context["work_dir"], exist_ok=True)
        if self.prepare is not None:
            with _PREPARE_LOCK:  # chains share the input the first prepare writes
                self.prepare(**context)
        return _Tracked(scenario, context, time.monotonic())

    def _drive(self, pending: list[_Tracked]) -> list[_Tracked]:
        """One driver process over ``pending``; returns the scenarios still unfinished."""
        self.processes += 1
        log = os.path.join(self.work, "logs", f"driver-{self.index}-{self.processes:03d}.log")
        outcome = self._run_process(pending, log)
        for i in outcome.done:
            self._finish(pending[i])
        rest = pending[len(outcome.done) :]
        if not rest or (outcome.current is None and outcome.returncode == 0):
            return rest
        tracked = rest[0]
        if outcome.current is None:  # died outside a run: blame the next one, go on
            tracked.error = f"driver exited with status {outcome.returncode}; see {log}"
        elif outcome.timed_out:
            tracked.error = f"run {tracked.runs} did not finish in {self.options.run_timeout_s}s"
        elif outcome.returncode == -signal.SIGKILL:
            tracked.kills += 1
            self.say(f"{tracked.scenario.id}: driver killed (SIGKILL) in run {tracked.runs}")
            self._agree(tracked, f"after the kill in run {tracked.runs}")
            if tracked.stuck:
                tracked.error = f"input not consumed after {tracked.runs} runs"
            else:
                return rest
        else:
            tracked.error = f"driver exited with status {outcome.returncode}; see {log}"
        self._finish(tracked)
        return rest[1:]

    def _run_process(self, pending: list[_Tracked], log: str) -> _Outcome:
        os.makedirs(os.path.dirname(log), exist_ok=True)
        plan_path, status_path = log[:-4] + ".plan.json", log[:-4] + ".status"
        steps = [t.next_step(i) for i, t in enumerate(pending)]
        with open(plan_path, "w") as f:
            json.dump({"job": self.options.job.job, "steps": steps}, f)
        open(status_path, "w").close()
        env = dict(os.environ)
        env.pop("STREAM_SINK_FAILPOINT", None)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "stream_sink.ops.drill.child", plan_path, status_path],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            self.live = proc
            try:
                return self._watch(proc, pending, status_path, log)
            finally:
                _kill_group(proc)
                self.live = None

    def _watch(
        self, proc: subprocess.Popen[bytes], pending: list[_Tracked], status: str, log: str
    ) -> _Outcome:
        outcome = _Outcome()
        delay: float | None = None  # the current run's kill delay, until its first batch
        deadline: float | None = None
        run_end = 0.0
        while True:
            for event, step in _read_status(status, outcome):
                tracked = pending[step]
                if event == "start":
                    tracked.runs += 1
                    tracked.logs.append(log)
                    self._announce(tracked)
                    delay = tracked.scenario.kill_delay(tracked.runs - 1)
                    deadline = None
                    run_end = time.monotonic() + self.options.run_timeout_s
                elif event == "batch" and delay is not None:
                    deadline, delay = time.monotonic() + delay, None
                elif event == "done":
                    delay = deadline = None
                elif event == "fault":
                    tracked.faults += 1
                    self.say(f"{tracked.scenario.id}: fault acted out in run {tracked.runs}")
            if proc.poll() is not None:
                outcome.returncode = proc.returncode
                return outcome
            now = time.monotonic()
            if outcome.current is not None and (deadline is not None and now >= deadline):
                _kill_group(proc)
                deadline = None
            elif outcome.current is not None and now >= run_end:
                outcome.timed_out = True
                _kill_group(proc)
            time.sleep(POLL_S)

    def _announce(self, tracked: _Tracked) -> None:
        s = tracked.scenario
        if tracked.runs == 1:
            armed = f"STREAM_SINK_FAILPOINT={s.failpoint}" if s.failpoint else s.moment
            self.say(f"{s.id}: run 1 started ({armed})")
        else:
            self.say(f"{s.id}: restart {tracked.runs - 1} from the same checkpoint location")

    def _agree(self, tracked: _Tracked, when: str) -> None:
        """Note in ``tracked`` when its tables hold different checkpoints."""
        try:
            problem = check_agreement(self.options.job, tracked.context, when)
        except Exception as e:  # a table that cannot be read is noted, the drill goes on
            problem = f"{when}: reading the tables failed: {type(e).__name__}: {e}"
        if problem is not None:
            tracked.disagreements.append(problem)
            self.say(f"{tracked.scenario.id}: {problem}")

    def _equality_deletes(self, context: dict[str, Any]) -> str | None:
        """Why a positions scenario's tables break their contract: a snapshot that lists
        an equality delete file, a Delta version that rewrote a data file (None: none
        does)."""
        job = self.options.job
        if job.table.startswith(DELTA_PREFIX):
            location = os.path.join(context["work_dir"], job.table[len(DELTA_PREFIX) :])
            rewrote = delta_rewrite_versions(location)
            if rewrote:
                return (
                    f"table {job.table}: deletes='positions', yet {len(rewrote)} version(s) "
                    f"rewrote a data file (first: {rewrote[0]})"
                )
            return None
        catalog = open_scenario_catalog(self.options.job, context)
        try:
            for name in self.options.job.tables:
                table = catalog.load_table(scenario_table(name, context))
                bad = equality_delete_snapshots(table)
                if bad:
                    return (
                        f"table {name}: deletes='positions', yet {len(bad)} snapshot(s) list "
                        f"an equality delete file (first: {bad[0]})"
                    )
        finally:
            catalog.close()
        return None

    def _finish(self, tracked: _Tracked) -> None:
        readers: dict[str, RowCounts | None] = {}
        tables: dict[str, dict[str, RowCounts | None]] = {}
        expected_rows = 0
        error = tracked.error
        job = self.options.job
        try:
            if len(job.tables) > 1:
                expected_rows, tables = verify_tables(job, tracked.context, self.expected)
                readers = summed(tables.values())
            else:
                expected_rows, readers = verify(job, tracked.context, self.expected)
        except Exception as e:  # the report says why, the other scenarios go on
            error = error or f"reading or comparing the table failed: {type(e).__name__}: {e}"
        if error is None and job.deletes == "positions":
            try:
                error = self._equality_deletes(tracked.context)
            except Exception as e:  # the report says why, the other scenarios go on
                error = f"reading the table's manifests failed: {type(e).__name__}: {e}"
        if error is None:
            self._agree(tracked, "at the end")
        s = tracked.scenario
        result = ScenarioResult(
            id=s.id,
            mode=s.mode,
            kind=s.kind,
            failpoint=s.failpoint,
            kill_delays_s=s.kill_delays,
            kills=tracked.kills,
            restarts=max(0, tracked.runs - 1),
            expected_rows=expected_rows,
            readers=readers,
            error=error,
            duration_s=time.monotonic() - tracked.started,
            logs=tuple(dict.fromkeys(tracked.logs)),
            tables=tables,
            disagreements=tuple(tracked.disagreements),
            faults=tracked.faults,
        )
        self.results.append(result)
        self.say(f"{s.id}: {describe(result)}")


def verify(
    job: JobSpec, context: dict[str, Any], expected_fn: Callable[..., Any]
) -> tuple[int, dict[str, RowCounts | None]]:
    """(expected row count, counts per reader) for the scenario's table."""
    expected = expected_fn(**context)
    if job.table.startswith(DELTA_PREFIX):
        return expected.num_rows, _verify_delta(job, context, expected)
    catalog = open_scenario_catalog(job, context)
    try:
        return expected.num_rows, _verify_iceberg(
            catalog, scenario_table(job.table, context), expected, job.deletes == "positions"
        )
    finally:
        catalog.close()


def verify_tables(
    job: JobSpec, context: dict[str, Any], expected_fn: Callable[..., Any]
) -> tuple[int, dict[str, dict[str, RowCounts | None]]]:
    """(expected row count over all tables, counts per reader of each table) for a job
    writing several Iceberg tables, each of which must hold ``expected_fn``'s rows."""
    expected = expected_fn(**context)
    catalog = open_scenario_catalog(job, context)
    try:
        tables = {
            name: _verify_iceberg(
                catalog, scenario_table(name, context), expected, job.deletes == "positions"
            )
            for name in job.tables
        }
    finally:
        catalog.close()
    return expected.num_rows * len(tables), tables


def _verify_iceberg(
    catalog: Any, name: str, expected: pa.Table, positions: bool = False
) -> dict[str, RowCounts | None]:
    """An Iceberg table read by us and by DuckDB (when installed and its metadata local).
    ``positions``: also by pyiceberg (when installed)."""
    table = catalog.load_table(name)
    readers: dict[str, RowCounts | None] = {
        PRIMARY_READER: compare(expected, table.scan().to_arrow())
    }
    readers["duckdb"] = None  # DuckDB reads local metadata files here
    if duckdb_reader.available() and "://" not in table.metadata_location:
        found = duckdb_reader.read_table(table.metadata_location, expected.column_names)
        readers["duckdb"] = compare(expected, found)
    if positions:
        theirs = pyiceberg_read(table.metadata_location)
        readers["pyiceberg"] = None if theirs is None else compare(expected, theirs)
    return readers


def _verify_delta(
    job: JobSpec, context: dict[str, Any], expected: pa.Table
) -> dict[str, RowCounts | None]:
    """A Delta table at ``delta:<path>`` (relative to the scenario's work dir) read by us,
    by delta-rs and by DuckDB's delta extension (each when installed)."""
    location = os.path.join(context["work_dir"], job.table[len(DELTA_PREFIX) :])
    found = DeltaTable.load(location).to_arrow()
    readers: dict[str, RowCounts | None] = {PRIMARY_READER: compare(expected, found)}
    readers["delta-rs"] = None
    with contextlib.suppress(ImportError):
        from deltalake import DeltaTable as DeltaRs

        readers["delta-rs"] = compare(expected, _delta_rs_read(DeltaRs(location)))
    readers["duckdb"] = None
    if duckdb_reader.available(duckdb_reader.DELTA_EXTENSION_PACKAGES):
        duck = duckdb_reader.read_delta_table(location, expected.column_names)
        readers["duckdb"] = compare(expected, duck)
    return readers


def _delta_rs_read(table: Any) -> pa.Table:
    """Every live row as delta-rs reads it: through its query engine, which applies
    deletion vectors (``to_pyarrow_table`` refuses a table with them)."""
    from deltalake import QueryBuilder

    return pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())


def describe(result: ScenarioResult) -> str:
    """One line: verdict, counts and restarts."""
    p = result.primary
    counts = (
        f"{result.expected_rows} rows expected, {p.rows} found, {p.duplicated} "
        f"duplicated, {p.missing} missing, {p.unexpected} unexpected"
        if p
        else "table not read"
    )
    faults = f"{result.faults} fault(s), " if result.faults else ""
    runs = f"{faults}{result.kills} kill(s), {result.restarts} restart(s)"
    reached = "" if result.reached else "; never killed (the run ended first)"
    verdict = result.verdict if result.verdict == "ok" else "FAIL: " + ", ".join(result.problems)
    error = f" [{result.error}]" if result.error else ""
    return f"{verdict} ({counts}; {runs}{reached}){error}"


def _read_status(path: str, outcome: _Outcome) -> list[tuple[str, int]]:
    """New complete ``start``/``batch``/``fault``/``done`` lines of the status file (event, step),
    applied to ``outcome``."""
    with open(path) as f:
        text = f.read()
    complete = text[: text.rfind("\n") + 1].splitlines()
    lines = [line.split() for line in complete[outcome.lines_read :]]
    outcome.lines_read = len(complete)
    events = [(w[0], int(w[1])) for w in lines if len(w) >= 2]
    for event, step in events:
        if event == "start":
            outcome.current = step
        elif event == "done":
            outcome.done.append(step)
            outcome.current = None
    return events


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the driver and everything it started (its own process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class _Progress:
    def __init__(self, out: TextIO, started: float) -> None:
        self.out, self.started = out, started
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        with self._lock:
            print(f"[{time.monotonic() - self.started:7.1f}s] {message}", file=self.out, flush=True)


def modes_of(text: str | Sequence[str]) -> tuple[str, ...]:
    """``append,upsert`` → ("append", "upsert")."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    return tuple(p.strip() for p in parts if p.strip())
