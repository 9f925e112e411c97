"""Batches of tombstones only, and batches a foreachBatch function skips.

The documented Debezium pattern (``from_debezium(batch, row_schema=debezium_row_schema
(batch))`` for every batch) applies a batch of tombstones only with its keys' row
schema, first in a run and later, through graceful restarts, on both targets. A function
that returns early for such a batch loses its deletes: the sink says so at the next
batch (SkippedBatchError, nothing of that batch written) or at the restart after a
graceful stop, never blaming a stale state, and ``stream-sink rewind`` makes Spark run
the skipped batch again, after which the table is exact.

Tests stream_sink.spark.foreach_batch.batch_gaps: batches a foreachBatch function skipped.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from connect_events import record, row, tombstone
from kill_harness import KillJob, assert_committed_once, iceberg_marks, kill_rng
from readers import duckdb_rows
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.cli.main import main as cli
from stream_sink.delta import DeltaTable
from stream_sink.exceptions import SkippedBatchError
from stream_sink.spark import (
    ORDER_COLUMN,
    ROW_KIND_COLUMN,
    DeltaSink,
    IcebergSink,
    debezium_row_schema,
    from_debezium,
)

ORDERS = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        ("status", pa.string()),
        ("amount", pa.decimal128(10, 2)),
        ("placed", pa.date32()),
    ]
)
DAY = datetime.date(2024, 5, 1)
Apply = Callable[[Any, int], None]


def created(i: int, lsn: int, status: str = "new") -> dict[str, Any]:
    return record("c", lsn, None, row(i, status, f"{i}.50", DAY))


def updated(i: int, lsn: int, status: str) -> dict[str, Any]:
    return record("u", lsn, row(i, "new", f"{i}.50", DAY), row(i, status, f"{i}.75", DAY))


RUNS = [
    [[tombstone(7), tombstone(8)]],  # a first batch of tombstones only, into an empty table
    [[created(i, 10 + i) for i in (1, 2, 3, 4)], [tombstone(2)]],  # one later in the run
    [[tombstone(3)], [updated(1, 30, "paid")]],  # one first in a run that has rows before
]
EXPECTED = [(1, "paid", "1.75"), (4, "new", "4.50")]


def documented(sink: Any) -> Apply:
    """docs/debezium.md's foreachBatch function: every batch reaches the sink."""

    def apply(batch: Any, batch_id: int) -> None:
        rows = debezium_row_schema(batch)
        sink.foreach_batch(from_debezium(batch, row_schema=rows), batch_id)

    return apply


def skipping(sink: Any) -> Apply:
    """A function that returns early for a batch of tombstones only (losing deletes)."""

    def apply(batch: Any, batch_id: int) -> None:
        if batch.where("value IS NOT NULL").isEmpty():
            return
        sink.foreach_batch(from_debezium(batch, row_schema=debezium_row_schema(batch)), batch_id)

    return apply


def run(spark: Any, source: Path, sink: Any, apply: Callable[[Any], Apply]) -> None:
    """One run over the files not yet read, then a graceful stop and close."""
    try:
        run_available(
            spark, source, "key string, value string", apply(sink), sink.spark_checkpoint_location
        )
    finally:
        sink.close()


def sinks(tmp_path: Path, target: str) -> tuple[Callable[[], Any], Callable[[], list[tuple]]]:
    """A factory of the target's sink (one per run, as a restarted driver makes) and a
    reader of its rows as (order_id, status, amount)."""
    common: dict[str, Any] = dict(
        mode="upsert",
        row_kind_column=ROW_KIND_COLUMN,
        order_by=ORDER_COLUMN,
        checkpoint_location=str(tmp_path / "chk"),
        state_dir=str(tmp_path / "state"),
    )
    if target == "iceberg":
        catalog = ss.load_catalog("c", type="hadoop", warehouse=str(tmp_path / "warehouse"))
        catalog.create_namespace("shop")
        catalog.create_table("shop.orders", schema=ORDERS, identifier_fields=["order_id"])

        def read() -> pa.Table:
            return catalog.load_table("shop.orders").scan().to_arrow()

        return lambda: IcebergSink(catalog=catalog, table="shop.orders", **common), _rows(read)
    lake = str(tmp_path / "lake")
    DeltaTable.create(lake, ORDERS)
    return (
        lambda: DeltaSink(path=lake, equality_fields=["order_id"], **common),
        _rows(lambda: DeltaTable.load(lake).to_arrow()),
    )


def _rows(read: Callable[[], pa.Table]) -> Callable[[], list[tuple]]:
    def rows() -> list[tuple]:
        t = read()
        cols = [t.column(c).to_pylist() for c in ("order_id", "status", "amount")]
        return sorted((i, s, str(a)) for i, s, a in zip(*cols, strict=True))

    return rows


@pytest.mark.parametrize("target", ["iceberg", "delta"])
def test_batches_of_tombstones_only_first_and_later_in_runs_through_graceful_restarts(
    spark: Any, tmp_path: Path, target: str
) -> None:
    make, rows = sinks(tmp_path, target)
    source, first = tmp_path / "in", 0
    for batches in RUNS:
        write_batches(source, batches, first=first)
        first += len(batches)
        run(spark, source, make(), documented)
    assert rows() == EXPECTED


def test_a_skipped_batch_stops_the_next_one_and_a_rewind_applies_it(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    make, rows = sinks(tmp_path, "iceberg")
    source = tmp_path / "in"
    write_batches(source, [*RUNS[1], [updated(4, 40, "sent")]])
    with pytest.raises(StreamingQueryException) as e:
        run(spark, source, make(), skipping)
    text = str(e.value)
    assert "SkippedBatchError" in text and "batch(es) [1]" in text, text
    assert "stale" not in text
    assert rows() == [
        (1, "new", "1.50"),
        (2, "new", "2.50"),
        (3, "new", "3.50"),
        (4, "new", "4.50"),
    ]
    # the function fixed, but Spark acknowledged batch 1: refused at the batch, and again
    # by close (which opens the state to commit what the run left)
    with pytest.raises((StreamingQueryException, SkippedBatchError), match=r"\(es\) \[1\]"):
        run(spark, source, make(), documented)
    spark_location = make().spark_checkpoint_location
    assert cli(["rewind", "--spark-checkpoint-location", spark_location, "--batch", "1"]) == 0
    run(spark, source, make(), documented)
    assert rows() == [(1, "new", "1.50"), (3, "new", "3.50"), (4, "sent", "4.75")]


def test_a_skipped_last_batch_before_a_graceful_stop_is_named_at_the_restart(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    make, rows = sinks(tmp_path, "iceberg")
    source = tmp_path / "in"
    write_batches(source, RUNS[1])
    run(spark, source, make(), skipping)  # batch 1 skipped, then the query stops
    write_batches(source, [[updated(1, 30, "paid")]], first=2)
    with pytest.raises((StreamingQueryException, SkippedBatchError)) as e:
        run(spark, source, make(), documented)  # refused at the batch, and again by close
    text = f"{type(e.value).__name__}: {e.value}"
    assert "SkippedBatchError" in text and "batch(es) [1]" in text and "stale" not in text
    spark_location = make().spark_checkpoint_location
    assert f"stream-sink rewind --spark-checkpoint-location {spark_location} --batch 1" in text
    assert cli(["rewind", "--spark-checkpoint-location", spark_location, "--batch", "1"]) == 0
    run(spark, source, make(), documented)
    assert rows() == [(1, "paid", "1.75"), (3, "new", "3.50"), (4, "new", "4.50")]


KILL_JOB = Path(__file__).with_name("tombstone_kill_job.py")


@pytest.mark.slow
@pytest.mark.spread
def test_killed_around_batches_of_tombstones_only_first_and_later_in_runs(
    tmp_path: Path,
) -> None:
    """Killed with a first batch of tombstones pending, with a later one pending, in the
    restore that commits it, and at a random moment: every snapshot is stamped once and
    the table ends as the changes say."""
    catalog = ss.load_catalog("c", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("shop")
    catalog.create_table("shop.orders", schema=ORDERS, identifier_fields=["order_id"])
    batches = [
        [tombstone(7)],
        [created(i, 10 + i) for i in (1, 2, 3, 4)],
        [tombstone(2)],
        [updated(1, 30, "paid")],
        [tombstone(3), tombstone(9)],
    ]
    write_batches(tmp_path / "in", batches)
    job = KillJob(KILL_JOB, [str(tmp_path)], log=tmp_path / "job.log", timeout=600)
    job.killed_at("after-pending-write@1")  # batch 0, tombstones only, first in the run
    job.killed_at("after-pending-write@2")  # batch 2, tombstones only, later in the run
    job.killed_at("after-staged-write@1")  # the restore that commits batch 2
    job.killed_mid_stream(kill_rng(41))
    job.run_to_end()
    table = catalog.load_table("shop.orders")
    assert_committed_once(iceberg_marks(table), "tombstones")
    rows = sorted(
        (r["order_id"], r["status"], str(r["amount"])) for r in duckdb_rows(table.metadata_location)
    )
    assert rows == EXPECTED
