"""Maintenance against independent engines (Java Iceberg, DuckDB):

- the four compaction-vs-writer scenarios of Iceberg's use-starting-sequence-number
  analysis (a compaction planned at snapshot b, then (1) an append, (2) a second
  identical compaction, (3) an update of a row of a, (4) an append c then an update of
  a row of c), each with and without the starting sequence number: the compaction
  commits or is refused as Java's ``validateNoNewDeletesForDataFiles`` decides, and
  the rows are exact in our reader, DuckDB and Java;
- an append stream killed right after a table commit (before the batch is
  acknowledged), then Java's ``rewrite_data_files`` and ``expire_snapshots(retain_last
  => 1)``, then a restart: every row exactly once in all three readers;
- expiry interop: Java reads a table we expired, we and DuckDB read one Java expired.

One Java SQL call and one Java read for the whole module.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kill_harness import KillJob
from readers import duckdb_rows

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import CommitValidationError
from stream_sink.table.catalog import Catalog
from stream_sink.tables import IcebergTable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "table"))
from compaction import commit_compaction, plan_compaction

pytestmark = pytest.mark.interop

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
DRIVER = Path(__file__).resolve().parent / "append_driver.py"
STREAM_BATCHES = 5
KINDS = ("append", "second-compaction", "update-of-a", "append-c-then-update-of-c")
# what Java's RewriteFiles validation decides (MergingSnapshotProducer):
# with the starting sequence number only new position deletes conflict; without it any
# new delete whose partition and key bounds may reach a replaced file does.
EXPECTED_OUTCOME = {
    ("append", True): "committed",
    ("append", False): "committed",
    ("second-compaction", True): "refused",  # its input files are already replaced
    ("second-compaction", False): "refused",
    ("update-of-a", True): "committed",  # the equality delete keeps applying (old seq)
    ("update-of-a", False): "refused",  # it would stop applying: conflict
    ("append-c-then-update-of-c", True): "committed",
    ("append-c-then-update-of-c", False): "committed",  # key 7 is outside a's and b's bounds
}
Rows = list[tuple[int, str]]


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table({"id": [p[0] for p in pairs], "data": [p[1] for p in pairs]}, schema=ARROW)


def as_rows(t: pa.Table | list[dict[str, Any]]) -> Rows:
    items = t.to_pylist() if isinstance(t, pa.Table) else t
    return sorted((int(r["id"]), str(r["data"])) for r in items)


def ours(table: IcebergTable) -> Rows:
    return as_rows(table.refresh().scan().to_arrow())


@dataclass(frozen=True)
class Scenario:
    kind: str
    use_seq: bool
    outcome: str
    expected: Rows
    location: str
    ours: Rows
    duckdb: Rows


def run_scenario(catalog: Catalog, kind: str, use_seq: bool) -> Scenario:
    name = f"db.{kind.replace('-', '_')}_{'seq' if use_seq else 'noseq'}"
    t = catalog.create_table(name, ARROW, identifier_fields=["id"])
    t.append(rows((1, "a"), (2, "a"), (3, "a")))  # snapshot a
    t.append(rows((4, "b"), (5, "b"), (6, "b")))  # snapshot b
    plan = plan_compaction(t)
    model = {i: ("a" if i <= 3 else "b") for i in range(1, 7)}
    if kind == "append":
        t.append(rows((7, "c"), (8, "c")))
        model.update({7: "c", 8: "c"})
    elif kind == "second-compaction":
        commit_compaction(t, plan_compaction(t), use_seq)
    elif kind == "update-of-a":
        t.upsert(rows((2, "a2")))
        model[2] = "a2"
    else:
        t.append(rows((7, "c"), (8, "c")))
        t.upsert(rows((7, "c7")))
        model.update({7: "c7", 8: "c"})
    try:
        commit_compaction(t, plan, use_seq)
        outcome = "committed"
    except CommitValidationError:
        outcome = "refused"
        for f in plan.new_files:  # a refused rewrite's files are the caller's
            os.remove(f.file_path)
    t.refresh()
    return Scenario(
        kind,
        use_seq,
        outcome,
        sorted(model.items()),
        t.metadata_location,
        ours(t),
        as_rows(duckdb_rows(t.metadata_location)),
    )


def run_driver(root: Path, failpoint: str | None) -> tuple[int, str]:
    """The append driver on ``root``, armed with ``failpoint``: exit status and output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [str(root), "db.stream", str(STREAM_BATCHES)]
    job = KillJob(DRIVER, args, env=env, log=root / "driver.log", timeout=300)
    return job.run(failpoint)


@dataclass
class World:
    scenarios: list[Scenario]
    java: dict[str, Rows]
    stream: IcebergTable
    stream_first_run: tuple[int, str]  # killed at a failpoint: exit status, output
    stream_snapshots_after_java: int
    ours_expired: IcebergTable
    ours_expired_result: Any
    java_expired: IcebergTable
    java_expired_snapshots: tuple[int, int]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, java_sql: Any, java_read: Any) -> World:
    root = tmp_path_factory.mktemp("maintenance")
    catalog = load_catalog("m", type="hadoop", warehouse=str(root / "wh"))
    catalog.create_namespace("db")
    scenarios = [run_scenario(catalog, k, s) for k in KINDS for s in (True, False)]

    ours_exp = catalog.create_table("db.ours_exp", ARROW, identifier_fields=["id"])
    java_exp = catalog.create_table("db.java_exp", ARROW, identifier_fields=["id"])
    for t in (ours_exp, java_exp):
        t.append(rows((1, "x"), (2, "x")))
        t.upsert(rows((2, "y"), (3, "y")))
        t.append(rows((4, "z")))
    commit_compaction(ours_exp, plan_compaction(ours_exp), True)
    ours_result = ours_exp.new_expire_snapshots().expire_older_than(2**62).retain_last(1).commit()
    before_java = len(java_exp.refresh().snapshots())

    catalog.create_table("db.stream", ARROW)
    first = run_driver(root, "after-table-commit@3")  # killed once batch 2 is in the table
    java_sql(
        str(root / "wh"),
        [
            "CALL hc.system.rewrite_data_files(table => 'db.stream', "
            "options => map('min-input-files', '2'))",
            "CALL hc.system.expire_snapshots(table => 'db.stream', "
            "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)",
            "CALL hc.system.expire_snapshots(table => 'db.java_exp', "
            "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)",
        ],
    )
    stream = catalog.load_table("db.stream")
    after_java = len(stream.snapshots())
    code, out = run_driver(root, None)
    assert code == 0, out[-3000:]

    tables = {s.location: s.location for s in scenarios}
    extra = [ours_exp.refresh(), java_exp.refresh(), stream.refresh()]
    locations = [*tables, *(t.metadata_location for t in extra)]
    read = java_read(locations)
    return World(
        scenarios=scenarios,
        java={loc: as_rows(t) for loc, t in zip(locations, read, strict=True)},
        stream=stream,
        stream_first_run=first,
        stream_snapshots_after_java=after_java,
        ours_expired=ours_exp,
        ours_expired_result=ours_result,
        java_expired=java_exp,
        java_expired_snapshots=(before_java, len(java_exp.snapshots())),
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("use_seq", [True, False], ids=["starting-seq", "new-seq"])
def test_compaction_vs_writer_scenarios(world: World, kind: str, use_seq: bool) -> None:
    (s,) = [s for s in world.scenarios if s.kind == kind and s.use_seq == use_seq]
    assert s.outcome == EXPECTED_OUTCOME[(kind, use_seq)]
    assert s.ours == s.expected
    assert s.duckdb == s.expected
    assert world.java[s.location] == s.expected


def test_stream_killed_after_commit_survives_java_compaction_and_expiry(world: World) -> None:
    code, out = world.stream_first_run
    assert code == -signal.SIGKILL, out[-2000:]
    assert world.stream_snapshots_after_java == 1  # no snapshot the sink stamped is left
    expected = sorted((i, f"b{i // 10}") for i in range(10 * STREAM_BATCHES))
    loc = world.stream.metadata_location
    assert ours(world.stream) == expected
    assert as_rows(duckdb_rows(loc)) == expected
    assert world.java[loc] == expected


def test_java_reads_after_our_expiry_and_we_read_after_javas(world: World) -> None:
    expected = [(1, "x"), (2, "y"), (3, "y"), (4, "z")]
    ours_exp, java_exp = world.ours_expired, world.java_expired
    assert world.ours_expired_result.snapshots_expired == 3
    assert len(ours_exp.snapshots()) == 1
    assert world.java[ours_exp.metadata_location] == expected
    assert world.java_expired_snapshots == (3, 1)
    assert ours(java_exp) == expected
    # DuckDB drops no row here: keys are not null and the table is unpartitioned
    assert as_rows(duckdb_rows(java_exp.metadata_location)) == expected
    assert world.java[java_exp.metadata_location] == expected
