"""Kill the driver (SIGKILL) at every failpoint, restart it, and prove exactly-once, on
format version 2 and 3 tables.

Each scenario runs ``crash_driver.py`` over the scripted changelog of ``changelog.py``
with ``STREAM_SINK_FAILPOINT`` set, expects it to die by SIGKILL, runs it again without
the failpoint (it resumes after the last batch its commit log acknowledges), then reads
the table with DuckDB. Scenarios run concurrently (one subprocess each) to keep the
suite fast; each test checks one of them.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from changelog import CHANGELOGS, expected_rows
from harness import SCHEMA, live_files, staging_manifests, table_rows, watermark
from kill_harness import KillJob

from stream_sink.catalogs import load_catalog
from stream_sink.commit import FAILPOINTS
from stream_sink.table.table import Table

pytestmark = pytest.mark.slow  # drivers killed at every failpoint

DRIVER = str(Path(__file__).with_name("crash_driver.py"))
TIMEOUT_S = 120


@dataclass(frozen=True)
class Scenario:
    failpoint: str
    hit: int
    backend: str
    interval: int
    schedule: str = "synchronous"
    format_version: int = 2
    changelog: str = "plain"

    @property
    def name(self) -> str:
        name = f"{self.failpoint}@{self.hit}-{self.backend}-every{self.interval}"
        name = name if self.schedule == "synchronous" else f"{name}-{self.schedule}"
        name = name if self.changelog == "plain" else f"{name}-{self.changelog}"
        return name if self.format_version == 2 else f"{name}-v{self.format_version}"

    @property
    def batches(self) -> list:
        return CHANGELOGS[self.changelog]


SCENARIOS = (
    [Scenario(fp, 2, "rocksdb", 2) for fp in FAILPOINTS]
    + [Scenario(fp, 3, "memory", 1) for fp in ("after-staging-manifests", "after-table-commit")]
    # killed with a commit in flight: phase 2 runs on a background thread while the next
    # batch is written, and the batch was acknowledged before its commit ended
    + [
        Scenario(fp, 2, "rocksdb", 1, "pipelined")
        for fp in ("after-metadata-file-write", "after-table-commit", "after-state-cleanup")
    ]
    # a v3 table: deletion vectors instead of position-delete files, row lineage
    + [Scenario(fp, 2, "rocksdb", 2, format_version=3) for fp in FAILPOINTS]
    # a TRUNCATE of the source: the 2nd checkpoint (batches 2, 3) commits the batch that
    # empties the table; the kill lands in its staging or commit, or just after it
    + [Scenario(fp, 2, "rocksdb", 2, changelog="truncating") for fp in FAILPOINTS]
)


@dataclass(frozen=True)
class Outcome:
    root: Path
    first: tuple[int, str]  # exit status and output of the run armed with the failpoint
    second: tuple[int, str]  # of the restart


def _scenario(base: Path, scenario: Scenario) -> Outcome:
    root = base / scenario.name
    catalog = load_catalog("c", type="hadoop", warehouse=str(root / "warehouse"))
    catalog.create_namespace("db")
    catalog.create_table(
        "db.cdc",
        schema=SCHEMA,
        identifier_fields=["id"],
        format_version=scenario.format_version,
    )
    args = [
        str(root),
        scenario.backend,
        str(scenario.interval),
        scenario.schedule,
        scenario.changelog,
    ]
    job = KillJob(Path(DRIVER), args, log=root / "driver.log", timeout=TIMEOUT_S)
    first = job.run(f"{scenario.failpoint}@{scenario.hit}")
    return Outcome(root, first, job.run())


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    base = tmp_path_factory.mktemp("crash")
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {s.name: pool.submit(_scenario, base, s) for s in SCENARIOS}
        yield {name: f.result() for name, f in futures.items()}


def _table(root: Path) -> Table:
    return load_catalog("c", type="hadoop", warehouse=str(root / "warehouse")).load_table("db.cdc")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_killed_at_failpoint_then_restarted_holds_every_change_exactly_once(
    outcomes: dict[str, Outcome], scenario: Scenario
) -> None:
    out = outcomes[scenario.name]
    assert out.first[0] == -signal.SIGKILL, (
        f"the driver was not killed at {scenario.failpoint}: rc={out.first[0]}\n"
        f"{out.first[1][-3000:]}"
    )
    assert out.second[0] == 0, out.second[1][-3000:]
    table = _table(out.root)
    assert table.format_version == scenario.format_version
    assert table_rows(table) == expected_rows(scenario.batches)
    paths = [f.file_path for f in live_files(table)]
    assert len(paths) == len(set(paths)), "a file is referenced twice"
    if scenario.format_version == 3:  # the first batch updates a row it inserted
        assert any(f.is_deletion_vector for f in live_files(table)), "no deletion vector"
    assert watermark(table, "query-1", "cdc") == len(scenario.batches) - 1
    assert staging_manifests(table) == []
    acked = sorted(int(n) for n in os.listdir(out.root / "commits") if n.isdigit())
    assert acked == list(range(len(scenario.batches)))
    if scenario.changelog == "truncating":
        _check_truncated_once(table, scenario.batches)


def _check_truncated_once(table: Table, batches: list) -> None:
    """Each snapshot holds the rows of the changes up to the batch it is stamped with:
    no truncate applied twice (which would drop the changes after it), none skipped."""
    for snap in table.refresh().snapshots():
        stamp = snap.summary.get("stream-sink.max-committed-checkpoint-id")
        if stamp is None:
            continue
        got = table.scan(snapshot_id=snap.snapshot_id).to_arrow()
        rows = sorted(zip(got["id"].to_pylist(), got["data"].to_pylist(), strict=True))
        assert rows == expected_rows(batches[: int(stamp) + 1]), f"snapshot stamped {stamp}"


def test_every_failpoint_is_exercised() -> None:
    assert {s.failpoint for s in SCENARIOS} == set(FAILPOINTS)
    assert {s.failpoint for s in SCENARIOS if s.changelog == "truncating"} == set(FAILPOINTS)
    assert {s.failpoint for s in SCENARIOS if s.format_version == 3} == set(FAILPOINTS)
