"""Verdicts of a restart/recovery drill, and its JSON report.

A scenario's table is compared with the expected rows as multisets of canonical rows
(every column of the expected table; zoned timestamps in UTC, NaN equal to itself):

- ``missing``: expected copies not found (expected count minus found count, where positive);
- ``duplicated``: extra copies of expected rows (found count minus expected count, where
  positive, for rows that are expected at least once);
- ``unexpected``: rows found that are not expected at all (e.g. a stale version of an
  upserted key whose delete was lost).

A scenario passes ("ok") only when every reader finds zero of each and the job consumed
its input; otherwise its verdict is "fail" and ``problems`` names what went wrong, in the
order ``job-failed``, ``missing``, ``duplicated``, ``unexpected``, ``readers-disagree``,
``tables-disagree``.

A job writing several tables (``--target routed``) has every table compared with the
expected rows: ``readers`` then holds each reader's counts summed over the tables,
``tables`` each table's own, and ``readers-disagree`` means two readers of one table
disagree. ``tables-disagree``: after a kill, or at the end, some checkpoint was in some
of the tables and not the others (``disagreements`` says when and where; see
:mod:`.agreement`).

JSON report (``stream-sink drill --json REPORT``), schema version 1::

    {
      "schema_version": 1,
      "ok": true,                      # every scenario's verdict is "ok"
      "job": "module:function",        # the streaming job that was drilled
      "table": "demo.orders",
      "seed": 7,
      "work_dir": "/tmp/stream-sink-drill-…",
      "started_at": "2026-01-01T00:00:00Z",
      "duration_s": 123.4,
      "scenarios": [{
        "id": "upsert/after-table-commit@1",
        "mode": "upsert",              # append | changelog | upsert
        "kind": "failpoint",           # failpoint | random-kill | soak | mistake
        "failpoint": "after-table-commit@1",   # STREAM_SINK_FAILPOINT value, or null
        "kill_delays_s": [],           # planned random kill delays (random-kill, soak)
        "reached": true,               # at least one kill landed or fault was acted out
        "kills": 1,                    # SIGKILLs that hit the driver
        "faults": 0,                   # fault points acted out (lost-tables-answer)
        "restarts": 1,                 # runs started after the first
        "expected_rows": 730,
        "found_rows": 730,             # as read by the project's reader
        "duplicated": 0, "missing": 0, "unexpected": 0,
        "readers": {"stream_sink": {"rows": 730, "duplicated": 0, "missing": 0,
                                    "unexpected": 0},
                    "duckdb": {...same keys...} or null when DuckDB is not installed},
        "verdict": "ok",               # ok | fail
        "problems": [],                # see above
        "error": null,                 # why the job failed, when it did
        "tables": null,                # several tables: {"db.a": {reader: counts}, …}
        "disagreements": [],           # several tables: when they held other checkpoints
        "duration_s": 31.2,
        "logs": ["…/run-1.log", …]
      }, …]
    }
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

SCHEMA_VERSION = 1
PRIMARY_READER = "stream_sink"
OK, FAIL = "ok", "fail"
KINDS = ("failpoint", "random-kill", "soak")

CanonicalRow = tuple[Any, ...]


@dataclass(frozen=True)
class RowCounts:
    """One reader's view of a table compared with the expected rows."""

    rows: int
    duplicated: int
    missing: int
    unexpected: int

    @property
    def exact(self) -> bool:
        return self.duplicated == 0 and self.missing == 0 and self.unexpected == 0

    def __add__(self, other: RowCounts) -> RowCounts:
        return RowCounts(
            self.rows + other.rows,
            self.duplicated + other.duplicated,
            self.missing + other.missing,
            self.unexpected + other.unexpected,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "rows": self.rows,
            "duplicated": self.duplicated,
            "missing": self.missing,
            "unexpected": self.unexpected,
        }


@dataclass(frozen=True)
class ScenarioResult:
    """What one scenario did and found. ``readers`` maps a reader name to its counts, or
    to None when that reader is not available; the primary reader is always present
    unless the job failed before the table could be read. ``tables``: each table's
    readers, for a job writing several (empty otherwise); ``readers`` then sums them."""

    id: str
    mode: str
    kind: str
    failpoint: str | None
    kill_delays_s: tuple[float, ...]
    kills: int
    restarts: int
    expected_rows: int
    readers: Mapping[str, RowCounts | None]
    error: str | None = None
    duration_s: float = 0.0
    logs: tuple[str, ...] = ()
    tables: Mapping[str, Mapping[str, RowCounts | None]] = field(default_factory=dict)
    disagreements: tuple[str, ...] = ()
    faults: int = 0

    @property
    def reached(self) -> bool:
        return self.kills > 0 or self.faults > 0

    @property
    def primary(self) -> RowCounts | None:
        return self.readers.get(PRIMARY_READER)

    @property
    def problems(self) -> list[str]:
        per_table = self.tables.values() if self.tables else [self.readers]
        counts = [[c for c in readers.values() if c is not None] for readers in per_table]
        return tables_problems(self.error, counts, bool(self.disagreements))

    @property
    def verdict(self) -> str:
        return OK if not self.problems else FAIL

    def to_json(self) -> dict[str, Any]:
        primary = self.primary
        return {
            "id": self.id,
            "mode": self.mode,
            "kind": self.kind,
            "failpoint": self.failpoint,
            "kill_delays_s": [round(d, 3) for d in self.kill_delays_s],
            "reached": self.reached,
            "kills": self.kills,
            "faults": self.faults,
            "restarts": self.restarts,
            "expected_rows": self.expected_rows,
            "found_rows": primary.rows if primary else None,
            "duplicated": primary.duplicated if primary else None,
            "missing": primary.missing if primary else None,
            "unexpected": primary.unexpected if primary else None,
            "readers": _readers_json(self.readers),
            "verdict": self.verdict,
            "problems": self.problems,
            "error": self.error,
            "tables": {t: _readers_json(r) for t, r in self.tables.items()} or None,
            "disagreements": list(self.disagreements),
            "duration_s": round(self.duration_s, 3),
            "logs": list(self.logs),
        }


@dataclass(frozen=True)
class DrillReport:
    job: str
    table: str
    seed: int
    work_dir: str
    started_at: float
    duration_s: float
    scenarios: tuple[ScenarioResult, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(s.verdict == OK for s in self.scenarios)

    def to_json(self) -> dict[str, Any]:
        started = datetime.fromtimestamp(self.started_at, timezone.utc)
        return {
            "schema_version": SCHEMA_VERSION,
            "ok": self.ok,
            "job": self.job,
            "table": self.table,
            "seed": self.seed,
            "work_dir": self.work_dir,
            "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": round(self.duration_s, 3),
            "scenarios": [s.to_json() for s in self.scenarios],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"


def _readers_json(readers: Mapping[str, RowCounts | None]) -> dict[str, Any]:
    return {k: (v.to_json() if v else None) for k, v in readers.items()}


def problems_of(error: str | None, counts: Sequence[RowCounts]) -> list[str]:
    """The problem names of a scenario of one table (module docstring), empty when it
    passed; ``counts``: each available reader's."""
    return tables_problems(error, [counts], False)


def tables_problems(
    error: str | None, tables: Sequence[Sequence[RowCounts]], tables_disagree: bool
) -> list[str]:
    """The problem names of a scenario (module docstring), empty when it passed;
    ``tables``: each table's available readers' counts."""
    out = ["job-failed"] if error else []
    counts = [c for readers in tables for c in readers]
    if not counts:
        return out or ["job-failed"]
    for name in ("missing", "duplicated", "unexpected"):
        if any(getattr(c, name) > 0 for c in counts):
            out.append(name)
    if any(len(set(readers)) > 1 for readers in tables):
        out.append("readers-disagree")
    if tables_disagree:
        out.append("tables-disagree")
    return out


def summed(tables: Iterable[Mapping[str, RowCounts | None]]) -> dict[str, RowCounts | None]:
    """Each reader's counts summed over the tables; None for a reader that did not read
    every one of them."""
    listed = list(tables)
    out: dict[str, RowCounts | None] = {}
    for name in dict.fromkeys(n for readers in listed for n in readers):
        counts = [readers.get(name) for readers in listed]
        total = RowCounts(0, 0, 0, 0)
        for c in counts:
            total = total + c if c is not None else total
        out[name] = None if None in counts else total
    return out


def compare(expected: pa.Table, found: pa.Table) -> RowCounts:
    """``found`` against ``expected`` as multisets over the expected table's columns.

    Raises KeyError naming a column the found table lacks."""
    columns = expected.column_names
    missing_columns = [c for c in columns if c not in found.column_names]
    if missing_columns:
        raise KeyError(f"table has no column {missing_columns[0]!r} of the expected rows")
    return compare_rows(canonical_rows(expected, columns), canonical_rows(found, columns))


def compare_rows(expected: Iterable[CanonicalRow], found: Iterable[CanonicalRow]) -> RowCounts:
    want, got = Counter(expected), Counter(found)
    duplicated = missing = unexpected = 0
    for row, n in got.items():
        have = want.get(row, 0)
        if have == 0:
            unexpected += n
        elif n > have:
            duplicated += n - have
    for row, n in want.items():
        missing += max(0, n - got.get(row, 0))
    return RowCounts(sum(got.values()), duplicated, missing, unexpected)


def canonical_rows(table: pa.Table, columns: Sequence[str]) -> list[CanonicalRow]:
    """Rows of ``table`` (only ``columns``, in that order) as hashable, comparable tuples."""
    data = table.select(list(columns)).to_pylist()
    return [tuple(canonical_value(r[c]) for c in columns) for r in data]


def canonical_value(value: Any) -> Any:
    """One representation per value whatever the reader: zoned timestamps in UTC, NaN as
    text (so it equals itself), nested values as tuples, memoryviews as bytes."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return tuple(sorted((k, canonical_value(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(canonical_value(v) for v in value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value
