"""The drill's verdicts without Spark: duplicated/missing/unexpected counting, problems and
verdicts, the JSON report's schema, the printed table, scenario planning, the failpoints
each target reaches, and the agreement of a routed job's tables."""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from stream_sink.cli.drill import add_arguments, options_from_args, render
from stream_sink.commit.failpoints import FAILPOINTS, MULTI_TABLE_FAILPOINTS
from stream_sink.commit.iceberg.watermark import MAX_COMMITTED_CHECKPOINT_ID
from stream_sink.demo.data import TABLE_SCHEMA, generate
from stream_sink.demo.job import DemoConfig
from stream_sink.exceptions import InvalidOptionError
from stream_sink.ops.drill.agreement import check_agreement, disagreement
from stream_sink.ops.drill.jobs import (
    ROUTED_TABLES,
    JobSpec,
    _demo_config,
    _routed_config,
    change_images,
    demo_rows,
    open_scenario_catalog,
)
from stream_sink.ops.drill.report import (
    DrillReport,
    RowCounts,
    ScenarioResult,
    compare,
    compare_rows,
    problems_of,
    summed,
)
from stream_sink.ops.drill.scenarios import ScenarioSource, failpoint_specs, plan_scenarios


def table(ids: list[int], values: list[str] | None = None) -> pa.Table:
    return pa.table({"id": ids, "v": values or [f"v{i}" for i in ids]})


def test_exact_table_has_nothing_duplicated_or_missing() -> None:
    assert compare(table([1, 2, 3]), table([3, 1, 2])) == RowCounts(3, 0, 0, 0)


def test_extra_copies_are_duplicates_and_absent_rows_missing() -> None:
    counts = compare(table([1, 2, 3, 4]), table([1, 1, 1, 2, 3]))
    assert counts == RowCounts(rows=5, duplicated=2, missing=1, unexpected=0)


def test_a_stale_version_of_a_row_is_unexpected_and_its_new_version_missing() -> None:
    counts = compare(table([1, 2], ["new", "x"]), table([1, 2], ["old", "x"]))
    assert counts == RowCounts(rows=2, duplicated=0, missing=1, unexpected=1)


def test_rows_expected_twice_count_as_a_multiset() -> None:
    assert compare_rows([(1,), (1,)], [(1,)]) == RowCounts(1, 0, 1, 0)
    assert compare_rows([(1,), (1,)], [(1,), (1,), (1,)]) == RowCounts(3, 1, 0, 0)


def test_only_expected_columns_are_compared_and_values_are_normalized() -> None:
    utc = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    plus2 = utc.astimezone(timezone(timedelta(hours=2)))
    expected = pa.table({"id": [1, 2], "t": [utc, utc], "x": [float("nan"), 1.5]})
    found = pa.table(
        {"id": [2, 1], "t": [plus2, plus2], "x": [1.5, float("nan")], "extra": ["a", "b"]}
    )
    assert compare(expected, found).exact


def test_a_found_table_without_an_expected_column_is_refused() -> None:
    with pytest.raises(KeyError, match="'v'"):
        compare(table([1]), pa.table({"id": [1]}))


def test_problems_name_every_failure_and_reader_disagreement() -> None:
    ok = RowCounts(3, 0, 0, 0)
    assert problems_of(None, [ok, ok]) == []
    assert problems_of(None, [ok, RowCounts(4, 1, 0, 0)]) == ["duplicated", "readers-disagree"]
    assert problems_of(None, [RowCounts(2, 0, 1, 1)]) == ["missing", "unexpected"]
    assert problems_of("driver exited with status 1", [ok]) == ["job-failed"]
    assert problems_of(None, []) == ["job-failed"]


def result(readers: dict[str, RowCounts | None], **kw: object) -> ScenarioResult:
    base: dict[str, object] = dict(
        id="upsert/after-table-commit@1",
        mode="upsert",
        kind="failpoint",
        failpoint="after-table-commit@1",
        kill_delays_s=(),
        kills=1,
        restarts=1,
        expected_rows=3,
        readers=readers,
        duration_s=1.0,
        logs=("a.log",),
    )
    base.update(kw)
    return ScenarioResult(**base)  # type: ignore[arg-type]


def test_json_report_schema() -> None:
    good = result({"stream_sink": RowCounts(3, 0, 0, 0), "duckdb": None})
    bad = result(
        {"stream_sink": RowCounts(5, 2, 0, 0), "duckdb": RowCounts(5, 2, 0, 0)},
        id="append/random-kill-1",
        mode="append",
        kind="random-kill",
        failpoint=None,
        kill_delays_s=(3.25,),
    )
    report = DrillReport("m:f", "db.t", 7, "/w", 0.0, 12.5, (good, bad))
    doc = json.loads(report.dumps())
    assert doc["schema_version"] == 1 and doc["ok"] is False
    assert doc["started_at"] == "1970-01-01T00:00:00Z"
    assert set(doc) == {
        "schema_version",
        "ok",
        "job",
        "table",
        "seed",
        "work_dir",
        "started_at",
        "duration_s",
        "scenarios",
    }
    first, second = doc["scenarios"]
    assert set(first) == {
        "id",
        "mode",
        "kind",
        "failpoint",
        "kill_delays_s",
        "reached",
        "kills",
        "faults",
        "restarts",
        "expected_rows",
        "found_rows",
        "duplicated",
        "missing",
        "unexpected",
        "readers",
        "verdict",
        "problems",
        "error",
        "tables",
        "disagreements",
        "duration_s",
        "logs",
    }
    assert first["verdict"] == "ok" and first["readers"]["duckdb"] is None
    assert first["tables"] is None and first["disagreements"] == []
    assert second["verdict"] == "fail" and second["problems"] == ["duplicated"]
    assert second["found_rows"] == 5 and second["duplicated"] == 2
    assert second["kill_delays_s"] == [3.25] and second["failpoint"] is None
    assert second["readers"]["duckdb"] == {
        "rows": 5,
        "duplicated": 2,
        "missing": 0,
        "unexpected": 0,
    }


def test_printed_table_shows_moment_restarts_counts_and_verdict() -> None:
    unreached = result(
        {"stream_sink": RowCounts(3, 0, 0, 0)},
        kills=0,
        restarts=0,
        id="append/between-batch-commits@1",
        failpoint="between-batch-commits@1",
    )
    failed = result({"stream_sink": RowCounts(4, 1, 0, 0)})
    text = render(DrillReport("m:f", "db.t", 7, "/w", 0.0, 60.0, (unreached, failed)))
    lines = text.splitlines()
    assert lines[0].split() == [
        "mode",
        "kill",
        "moment",
        "restarts",
        "expected",
        "found",
        "duplicated",
        "missing",
        "unexpected",
        "verdict",
    ]
    assert "between-batch-commits@1 (not reached)" in lines[2] and lines[2].endswith("ok")
    assert lines[3].split()[-2:] == ["FAIL:", "duplicated"]
    assert lines[-1] == "2 scenarios in 60s: 1 FAILED"


def test_failpoint_selection() -> None:
    specs = failpoint_specs("all")
    assert [s.split("@")[0] for s in specs] == list(FAILPOINTS)
    assert "after-data-files@2" in specs and "after-table-commit@1" in specs
    assert failpoint_specs("after-staged-write@3, after-table-commit") == (
        "after-staged-write@3",
        "after-table-commit@1",
    )
    assert failpoint_specs("none") == ()
    with pytest.raises(InvalidOptionError, match="unknown failpoint 'nope'"):
        failpoint_specs("nope")
    with pytest.raises(InvalidOptionError, match="after-table-commit@0"):
        failpoint_specs("after-table-commit@0")


def test_scenarios_are_planned_per_mode_and_repeat_for_a_seed() -> None:
    def plan(seed: int) -> list[object]:
        return list(
            plan_scenarios(
                ("append", "upsert"), ("after-table-commit@1",), 2, random.Random(seed), 10.0
            )
        )

    first = plan(5)
    assert [s.id for s in first] == [  # type: ignore[attr-defined]
        "append/after-table-commit@1",
        "append/random-kill-1",
        "append/random-kill-2",
        "upsert/after-table-commit@1",
        "upsert/random-kill-1",
        "upsert/random-kill-2",
    ]
    assert first == plan(5) and first != plan(6)
    delays = [d for s in first for d in s.kill_delays]  # type: ignore[attr-defined]
    assert len(delays) == 4 and all(0.5 <= d <= 10.0 for d in delays)


def test_soak_source_adds_random_kill_scenarios_for_its_duration() -> None:
    source = ScenarioSource([], ("upsert", "append"), random.Random(1), 5.0, soak_s=3600)
    soak = [source.next() for _ in range(3)]
    assert [s.id for s in soak if s] == ["upsert/soak-1", "append/soak-2", "upsert/soak-3"]
    assert all(s and s.kind == "soak" and 1 <= len(s.kill_delays) <= 3 for s in soak)
    assert source.next(soak=False) is None  # a chain looking ahead takes no soak scenario
    assert ScenarioSource([], ("upsert",), random.Random(1), 5.0, soak_s=0).next() is None


def test_demo_expectations_follow_the_mode() -> None:
    stream = generate(300, 3, seed=4)
    images = change_images(stream.files)
    ops = [json.loads(line)["op"] for f in stream.files for line in f.decode().splitlines()]
    assert len(images) == len(ops) + ops.count("u")  # an update is -U before, +U after
    context = {"rows": 300, "files": 3, "seed": 4}
    append = demo_rows(mode="append", **context)
    upsert = demo_rows(mode="upsert", **context)
    assert append.schema == TABLE_SCHEMA and append.num_rows == len(images)
    assert upsert.num_rows == len(stream.expected)
    assert sorted(upsert.column("order_id").to_pylist()) == [r["order_id"] for r in stream.expected]


def options(*args: str) -> object:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return options_from_args(parser.parse_args(list(args)))


def test_each_target_takes_the_failpoints_its_job_reaches() -> None:
    routed = options("--target", "routed").failpoints  # type: ignore[attr-defined]
    names = [s.split("@")[0] for s in routed]
    n = len(MULTI_TABLE_FAILPOINTS)
    assert names[-n:] == list(MULTI_TABLE_FAILPOINTS) and "inside-tables-swap@2" in routed
    assert "lost-tables-answer" in names
    assert "between-batch-commits" not in names and "after-metadata-file-write" not in names
    one_table = options().failpoints  # type: ignore[attr-defined]
    assert [s.split("@")[0] for s in one_table] == list(FAILPOINTS)
    delta = options("--target", "delta").failpoints  # type: ignore[attr-defined]
    assert "between-batch-commits@1" not in delta and len(delta) == len(FAILPOINTS) - 1
    yours = ("--job", "m:run", "--table", "db.a,db.b", "--expected", "m:rows")
    mine = options(*yours, "--failpoints", "inside-tables-swap")
    assert mine.failpoints == ("inside-tables-swap@2",)  # type: ignore[attr-defined]
    assert mine.job.tables == ("db.a", "db.b")  # type: ignore[attr-defined]


def test_a_failpoint_the_target_never_reaches_is_refused_early() -> None:
    for args, message in (
        (
            ["--failpoints", "after-tables-commit"],
            r"--failpoints: --target iceberg .* never reaches 'after-tables-commit' \(it is a "
            r"step of a commit of several tables at once; --target routed drills it\); drop it",
        ),
        (
            ["--target", "routed", "--failpoints", "between-batch-commits@2"],
            r"--target routed .* never reaches 'between-batch-commits' \(the routed demo "
            r"checkpoints every batch.*choose from: after-data-files, .*inside-tables-swap",
        ),
        (["--target", "delta", "--failpoints", "between-batch-commits"], "commits every batch"),
        (["--target", "routed", "--mistakes", "all"], "drop --target routed or --mistakes"),
        (
            ["--target", "routed", "--catalog-type", "rest", "--catalog-uri", "http://x"],
            "drop --target routed",
        ),
    ):
        with pytest.raises(InvalidOptionError, match=message):
            options(*args)


def test_tables_that_disagree_fail_the_scenario_and_readers_sum_over_tables() -> None:
    ok = RowCounts(3, 0, 0, 0)
    tables = {
        "db.a": {"stream_sink": ok, "duckdb": ok},
        "db.b": {"stream_sink": ok, "duckdb": None},
    }
    assert summed(tables.values()) == {"stream_sink": RowCounts(6, 0, 0, 0), "duckdb": None}
    agreeing = result(summed(tables.values()), tables=tables)
    assert agreeing.verdict == "ok"
    apart = result(summed(tables.values()), tables=tables, disagreements=("after the kill",))
    assert apart.problems == ["tables-disagree"]
    doc = apart.to_json()
    assert doc["tables"]["db.b"] == {"stream_sink": ok.to_json(), "duckdb": None}
    assert doc["disagreements"] == ["after the kill"]
    split = {"db.a": {"stream_sink": ok, "duckdb": RowCounts(4, 1, 0, 0)}, "db.b": {"x": ok}}
    assert result({}, tables=split).problems == ["duplicated", "readers-disagree"]


def test_disagreement_names_each_tables_checkpoint() -> None:
    assert disagreement({"db.a": 3, "db.b": 3, "db.c": 3}) is None
    assert disagreement({"db.a": None}) is None
    text = disagreement({"db.b": None, "db.a": 3})
    assert text is not None
    assert "db.a up to batch 3, db.b without a commit" in text


def test_the_routed_jobs_tables_are_read_from_its_sql_catalog(tmp_path: Path) -> None:
    job = JobSpec.demo("routed")
    context = {"work_dir": str(tmp_path), "warehouse": str(tmp_path / "wh")}
    catalog = open_scenario_catalog(job, context)
    catalog.create_namespace("demo")
    for name in ROUTED_TABLES:
        catalog.create_table(name, schema=pa.schema([("id", pa.int64())]))
    assert check_agreement(job, context, "after the kill in run 1") is None
    for name in ROUTED_TABLES:
        catalog.load_table(name).new_append().set(MAX_COMMITTED_CHECKPOINT_ID, "0").commit()
    assert check_agreement(job, context, "after the kill in run 1") is None
    first = catalog.load_table(ROUTED_TABLES[0])
    first.new_append().set(MAX_COMMITTED_CHECKPOINT_ID, "1").commit()
    catalog.close()
    problem = check_agreement(job, context, "after the kill in run 1")
    assert problem == (
        "after the kill in run 1: the tables hold different checkpoints (demo.orders_a up to "
        "batch 1, demo.orders_b up to batch 0, demo.orders_c up to batch 0): some checkpoint "
        "is in some only"
    )


def test_the_routed_demo_config_survives_its_json() -> None:
    cfg = DemoConfig(routed_tables=ROUTED_TABLES, catalog_uri="sqlite:///c.db")
    assert DemoConfig.from_json(cfg.to_json()) == cfg


def test_deletes_positions_adds_its_failpoint_and_is_refused_where_it_cannot_apply() -> None:
    chosen = options("--deletes", "positions", "--mode", "upsert,changelog")
    assert chosen.job.deletes == "positions"  # type: ignore[attr-defined]
    assert "after-position-deletes@1" in chosen.failpoints  # type: ignore[attr-defined]
    routed = options("--target", "routed", "--deletes", "positions").failpoints  # type: ignore[attr-defined]
    assert "after-position-deletes@1" in routed and "inside-tables-swap@2" in routed
    assert "after-position-deletes@1" not in options().failpoints  # type: ignore[attr-defined]
    delta = options("--target", "delta", "--deletes", "positions", "--mode", "upsert")
    assert delta.job.deletes == "positions"  # type: ignore[attr-defined]
    assert "after-position-deletes@1" in delta.failpoints  # type: ignore[attr-defined]
    for args, message in (
        (
            ["--failpoints", "after-position-deletes"],
            r"never reaches 'after-position-deletes' \(the demo deletes by key \(Iceberg: "
            r"equality deletes; Delta: copy-on-write\); --deletes positions drills it\)",
        ),
        (["--deletes", "positions", "--mode", "append,upsert"], "drop --job or --mode append"),
        (
            ["--deletes", "positions", "--job", "m:run", "--table", "db.t", "--expected", "m:r"],
            "a --job sets its own sink's deletes",
        ),
    ):
        with pytest.raises(InvalidOptionError, match=message):
            options(*args)


def test_the_positions_demo_config_survives_its_json_and_reaches_the_sink() -> None:
    cfg = DemoConfig(deletes="positions")
    assert DemoConfig.from_json(cfg.to_json()) == cfg
    context = {
        "work_dir": "w",
        "warehouse": "w/warehouse",
        "checkpoint_location": "w/c",
        "state_dir": "w/s",
        "input_dir": "in",
        "mode": "upsert",
        "checkpoint_interval_batches": 2,
        "deletes": "positions",
    }
    assert _demo_config(context).deletes == "positions"
    assert _routed_config(context).deletes == "positions"


def test_equality_delete_snapshots_name_the_snapshots_that_list_one(tmp_path: Path) -> None:
    """The positions drill's check: a table whose upsert committed equality deletes is
    named by its snapshot; one with only data files is not."""
    from stream_sink.catalogs import load_catalog
    from stream_sink.ops.drill.delete_files import equality_delete_snapshots, pyiceberg_read

    catalog = load_catalog("t", type="hadoop", warehouse=str(tmp_path))
    catalog.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    table = catalog.create_table("db.t", schema, identifier_fields=["id"])
    table.append(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema))
    assert equality_delete_snapshots(table) == []
    read = pyiceberg_read(table.metadata_location)
    assert read is not None and sorted(read.column("id").to_pylist()) == [1, 2]
    table.upsert(pa.table({"id": [2], "v": ["c"]}, schema))
    table.refresh()
    assert equality_delete_snapshots(table) == [table.current_snapshot().snapshot_id]


def test_delta_rewrite_versions_name_a_copy_on_write_merge_not_a_positions_one(
    tmp_path: Path,
) -> None:
    """The Delta positions drill's check: a copy-on-write MERGE that rewrote a file is
    named by its version; vectors-only versions and a truncate are not."""
    from stream_sink.delta import DeltaTable
    from stream_sink.delta.key_positions import BatchKeys, DeltaPositionResolver, keys_folder
    from stream_sink.delta.merge import copy_on_write
    from stream_sink.ops.drill.delete_files import delta_rewrite_versions

    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    loc = str(tmp_path / "t")
    config = {"delta.enableDeletionVectors": "true"}
    table = DeltaTable.create(loc, schema, configuration=config)
    table.append(pa.table({"id": [1, 2, 3, 4, 5], "v": list("abcde")}, schema))
    table.append(pa.table({"id": [9], "v": ["z"]}, schema))  # a file no change touches
    keys = pa.table({"id": pa.array([2], pa.int64())})
    resolution = DeltaPositionResolver(["id"]).resolve(
        table.snapshot, table.io, [BatchKeys((), keys)]
    )
    table.new_transaction().add_all(resolution.adds).add_all(resolution.removes).commit("MERGE")
    assert delta_rewrite_versions(loc) == []
    gone = pa.table({"id": [1, 3, 4], "v": ["", "", ""], "op": ["-D"] * 3})
    merged = copy_on_write(table.refresh().snapshot, table.io, gone, ["id"], "changelog", "op")
    version = table.new_transaction().add_all(merged.adds).add_all(merged.removes).commit()
    assert delta_rewrite_versions(loc) == [version]  # 4 of 5 rows gone: rewritten
    live = list(table.refresh().snapshot.files.values())
    table.new_transaction().add_all(a.remove(0) for a in live).commit("TRUNCATE")
    assert delta_rewrite_versions(loc) == [version]
    assert keys_folder(loc, "s").endswith("_stream_sink/touched-keys/s")
