"""Pruning: a selective predicate opens only the files (and manifests) that can match.

Tests stream_sink.read.evaluators: whether a file or manifest can match.
Tests stream_sink.read.projection: filters projected onto partition specs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from read_support import CountingIO, hadoop_catalog

from stream_sink.read import TableScan, col
from stream_sink.read.binding import bind
from stream_sink.read.expressions import to_expression
from stream_sink.read.planner import Planner

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("category", pa.string()),
        pa.field("ts", pa.timestamp("us")),
    ]
)
DAY0 = dt.datetime(2024, 1, 1)


def _rows(ids: range, category: str, day: int) -> pa.Table:
    ts = [DAY0 + dt.timedelta(days=day, minutes=i % 600) for i in ids]
    return pa.table(
        {
            "id": list(ids),
            "category": [category] * len(ids),
            "ts": pa.array(ts, pa.timestamp("us")),
        },
        schema=SCHEMA,
    )


def _opened(table, row_filter) -> tuple[list[str], pa.Table]:
    table.io = CountingIO()
    out = table.scan(row_filter=row_filter).to_arrow()
    return list(table.io.opened), out


@pytest.fixture
def by_category_and_day(tmp_path: Path):
    t = hadoop_catalog(tmp_path).create_table(
        "db.p", schema=SCHEMA, partition_spec=[("identity", "category"), ("day", "ts")]
    )
    for day in range(3):
        for c in ("a", "b", "c"):
            start = day * 3000 + "abc".index(c) * 1000
            t.append(_rows(range(start, start + 1000), c, day))
    return t


def test_identity_point_predicate_opens_one_partition(by_category_and_day) -> None:
    t = by_category_and_day
    tasks = TableScan(t, row_filter=col("category") == "b").plan_files()
    assert len(tasks) == 3 and {task.data_file.partition[0] for task in tasks} == {"b"}
    opened, out = _opened(t, col("category") == "b")
    assert sorted(opened) == sorted(task.file_path for task in tasks)
    assert out.num_rows == 3000 and set(out.column("category").to_pylist()) == {"b"}


def test_day_range_prunes_older_days_and_manifests(by_category_and_day) -> None:
    t = by_category_and_day
    cut = DAY0 + dt.timedelta(days=2)
    opened, out = _opened(t, col("ts") >= cut.isoformat())
    assert len(opened) == 3
    assert out.num_rows == 3000
    planner = Planner(t, bind(col("ts") >= cut.isoformat(), t.schema(), "t"))
    planner.plan(t.current_snapshot())
    assert planner.manifests_read == 3  # of 9: one manifest per append


def test_identity_partition_makes_residual_trivial(by_category_and_day) -> None:
    t = by_category_and_day
    tasks = TableScan(t, row_filter="category = 'a' and id >= 0").plan_files()
    assert all(str(task.residual) == "id >= 0" for task in tasks)
    assert TableScan(t, row_filter="category = 'a'").count() == 3000


def test_metrics_prune_by_column_bounds(by_category_and_day) -> None:
    t = by_category_and_day
    opened, out = _opened(t, col("id") == 4242)
    assert len(opened) == 1
    assert out.column("id").to_pylist() == [4242]
    opened, out = _opened(t, col("id").isin([5, 8999]))
    assert len(opened) == 2 and sorted(out.column("id").to_pylist()) == [5, 8999]


def test_bucket_point_predicate_opens_one_bucket(tmp_path: Path) -> None:
    t = hadoop_catalog(tmp_path).create_table(
        "db.b", schema=SCHEMA, partition_spec=[("bucket", "id", 8)]
    )
    t.append(_rows(range(0, 2000), "x", 0))
    assert len(TableScan(t).plan_files()) == 8
    opened, out = _opened(t, col("id") == 1234)
    assert len(opened) == 1 and out.column("id").to_pylist() == [1234]
    opened, out = _opened(t, col("id") < 10)  # buckets cannot prune ranges; bounds can
    assert sorted(out.column("id").to_pylist()) == list(range(10))


def test_truncate_prunes_string_prefixes(tmp_path: Path) -> None:
    t = hadoop_catalog(tmp_path).create_table(
        "db.s", schema=SCHEMA, partition_spec=[("truncate", "category", 2)]
    )
    for i, c in enumerate(("apple", "apricot", "banana", "cherry")):
        t.append(_rows(range(i * 10, i * 10 + 10), c, 0))
    tasks = TableScan(t, row_filter=col("category") == "apricot").plan_files()
    assert {task.data_file.partition for task in tasks} == {("ap",)}
    opened, out = _opened(t, col("category") == "apricot")
    assert len(opened) == 1 and set(out.column("category").to_pylist()) == {"apricot"}
    opened, out = _opened(t, col("category") > "c")
    assert len(opened) == 1 and set(out.column("category").to_pylist()) == {"cherry"}


def test_null_checks_prune_with_null_counts(tmp_path: Path) -> None:
    t = hadoop_catalog(tmp_path).create_table("db.n", schema=SCHEMA)
    t.append(_rows(range(10), "x", 0))
    with_nulls = _rows(range(10, 20), "x", 0).set_column(1, "category", pa.nulls(10, pa.string()))
    t.append(with_nulls)
    opened, out = _opened(t, col("category").is_null())
    assert len(opened) == 1 and out.num_rows == 10
    opened, out = _opened(t, col("category") == "x")
    assert len(opened) == 1 and out.num_rows == 10


def test_string_filter_binds_like_expression(by_category_and_day) -> None:
    t = by_category_and_day
    text = bind(to_expression("category in ('a', 'c') and not id < 100"), t.schema(), "t")
    expr = bind(col("category").isin(["c", "a"]) & (col("id") >= 100), t.schema(), "t")
    assert text == expr
