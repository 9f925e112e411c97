"""A routed stream of Debezium transactions cut by micro-batches: with
``transactions="debezium"`` every state the tables are in after a batch holds whole
source transactions only (the same keys in all three tables); without it, some state
holds halves. The hold survives a restart, a lost hold stops the start, a transaction
whose END never comes is forced out by the bound, and a stream with transaction
columns but no hold is refused.

Tests stream_sink.spark.foreach_batch.transactions: the hold in front of the destination.
Tests stream_sink.spark.foreach_batch.arrow_frames: a batch to Arrow and back.
Tests stream_sink.spark.cdc.debezium: from_debezium(..., transactions=True)."""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from streams import run_available, write_batches
from tx_events import (
    SOURCE_SCHEMA,
    TABLES,
    cut,
    end_event,
    keys_by_table,
    sql_catalog_at,
    transactions,
)

import stream_sink as ss
from stream_sink.cli.main import main as cli_main
from stream_sink.exceptions import DataLossError, TransactionMetadataError
from stream_sink.spark import IcebergSink
from stream_sink.spark.cdc.control_columns import check_columns
from stream_sink.spark.cdc.debezium import from_debezium
from stream_sink.spark.foreach_batch.transactions import HOLD_SUFFIX
from stream_sink.table.catalog import Catalog


def sink_for(catalog: Catalog, root: Path, **kwargs: Any) -> IcebergSink:
    return IcebergSink(
        catalog=catalog,
        table_column="_table",
        namespaces=["inv", "shop"],
        create_tables=True,
        mode="upsert",
        row_kind_column="_row_kind",
        order_by="_cdc_order",
        checkpoint_location=str(root / "chk"),
        state_dir=str(root / "state"),
        **kwargs,
    )


def held_sink(catalog: Catalog, root: Path, **kwargs: Any) -> IcebergSink:
    return sink_for(catalog, root, transactions="debezium", **kwargs)


def run(
    spark: Any, root: Path, sink: IcebergSink, *, held: bool, states: list[dict[str, set[int]]]
) -> None:
    """Every input file through ``sink``; the tables' keys after each batch into ``states``."""

    def foreach(df: Any, batch_id: int) -> None:
        if not held:  # without the hold the transaction topic is not read
            df = df.where("get_json_object(value, '$.status') is null")
        changes = from_debezium(
            df, row_schema=TABLES, table_column="_table", key_column="key", transactions=held
        )
        sink.foreach_batch(changes, batch_id)
        states.append(keys_by_table(sink.catalog))

    try:
        run_available(spark, root / "in", SOURCE_SCHEMA, foreach, sink.spark_checkpoint_location)
    finally:
        sink.close()


def halves(states: list[dict[str, set[int]]]) -> int:
    """States in which the three tables do not hold the same transactions."""
    return sum(1 for s in states if len({frozenset(keys) for keys in s.values()}) > 1)


def catalog_at(root: Path) -> Catalog:
    return ss.load_catalog("tx", type="hadoop", warehouse=str(root / "wh"))


def test_every_state_holds_whole_transactions_only(spark: Any, tmp_path: Path) -> None:
    events, final = transactions(12)
    write_batches(tmp_path / "in", cut(events, 5))  # 4 or 7 events a transaction
    catalog = catalog_at(tmp_path)
    sink = sink_for(catalog, tmp_path, transactions="debezium")
    states: list[dict[str, set[int]]] = []
    run(spark, tmp_path, sink, held=True, states=states)
    assert len(states) >= 10
    assert halves(states) == 0, states
    assert keys_by_table(catalog) == final
    metrics = sink.transaction_metrics
    assert metrics is not None and metrics.completed_transactions == 12
    assert metrics.forced_transactions == 0 and metrics.held_rows == 0
    # the same query again: every batch is a replay, nothing changes
    locations = {n: catalog.load_table(n).metadata_location for n in TABLES}
    run(spark, tmp_path, held_sink(catalog, tmp_path), held=True, states=[])
    assert {n: catalog.load_table(n).metadata_location for n in TABLES} == locations


def test_positions_tables_commit_each_checkpoint_in_one_transaction(
    spark: Any, tmp_path: Path
) -> None:
    """``deletes="positions"`` on the SQL catalog: a checkpoint's tables are committed in
    one catalog transaction, each table's deletes resolved to positions, no snapshot
    holds an equality-delete file, and pyiceberg reads the final tables."""
    from readers import pyiceberg_rows
    from tx_events import KEYS

    from stream_sink.table.manifest import DataFileContent, read_manifest, read_manifest_list

    events, final = transactions(8)
    write_batches(tmp_path / "in", cut(events, 5))
    catalog = sql_catalog_at(tmp_path)
    carried: list[int] = []
    real = catalog.commit_tables

    def commit_tables(commits: Any, **kw: Any) -> Any:
        carried.append(len(commits))
        return real(commits, **kw)

    catalog.commit_tables = commit_tables  # type: ignore[method-assign]
    states: list[dict[str, set[int]]] = []
    run(
        spark, tmp_path, held_sink(catalog, tmp_path, deletes="positions"), held=True, states=states
    )
    assert halves(states) == 0 and keys_by_table(catalog) == final
    assert carried and max(carried) == len(TABLES), carried
    for name in TABLES:
        table = catalog.load_table(name)
        meta = table.metadata
        for snap in meta.snapshots:  # every snapshot, every manifest
            for m in read_manifest_list(table.io, snap.manifest_list):
                ptype = meta.spec_by_id(m.partition_spec_id).partition_type(meta.schema)
                kinds = {e.data_file.content for e in read_manifest(table.io, m, ptype)}
                assert DataFileContent.EQUALITY_DELETES not in kinds, (name, snap.snapshot_id)
        rows = pyiceberg_rows(table.metadata_location)
        assert {int(str(r[KEYS[name]]).lstrip("s")) for r in rows} == final[name]


def test_without_the_hold_a_state_holds_halves(spark: Any, tmp_path: Path) -> None:
    """The contrast: the same input, batches committed as Spark cuts them."""
    events, final = transactions(12)
    write_batches(tmp_path / "in", cut(events, 5))
    catalog = catalog_at(tmp_path)
    states: list[dict[str, set[int]]] = []
    run(spark, tmp_path, sink_for(catalog, tmp_path), held=False, states=states)
    assert halves(states) > 0
    assert keys_by_table(catalog) == final


def test_the_hold_survives_a_restart_and_a_lost_hold_stops_it(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events, final = transactions(6)
    batches = cut(events, 5)
    write_batches(tmp_path / "in", batches[:2])  # ends inside transaction 1 (its END not read)
    catalog = catalog_at(tmp_path)
    sink = sink_for(catalog, tmp_path, transactions="debezium")
    run(spark, tmp_path, sink, held=True, states=[])
    metrics = sink.transaction_metrics
    assert metrics is not None and metrics.held_transactions == 1
    assert metrics.held_rows == 9  # three creates and three updates (two rows each)
    assert keys_by_table(catalog) == {t: {0} for t in TABLES}
    chk = str(tmp_path / "chk")
    cli_main(["status", "--checkpoint-location", chk, "--sink-id", "routed-_table=inv.orders"])
    assert re.search(r"held transactions +1 \(9 rows\) since batch 0", capsys.readouterr().out)

    saved = tmp_path / "hold-saved"
    hold = tmp_path / "state" / f"{sink.sink_id}{HOLD_SUFFIX}"
    assert hold.is_dir()
    shutil.copytree(hold, saved)
    shutil.rmtree(hold)
    write_batches(tmp_path / "in", batches[2:], first=2)
    with pytest.raises(Exception, match=r"held source transactions at .* are missing") as err:
        run(spark, tmp_path, held_sink(catalog, tmp_path), held=True, states=[])
    assert isinstance(err.value, DataLossError) or "DataLossError" in str(err.value)
    assert keys_by_table(catalog) == {t: {0} for t in TABLES}  # nothing written

    shutil.copytree(saved, hold)
    states: list[dict[str, set[int]]] = []
    run(spark, tmp_path, held_sink(catalog, tmp_path), held=True, states=states)
    assert halves(states) == 0 and keys_by_table(catalog) == final


def test_a_transaction_whose_end_never_comes_is_forced_out(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events, _ = transactions(3)
    lost = [e for e in events if not json.loads(e["value"]).get("id", "").startswith("701:")]
    write_batches(tmp_path / "in", [*cut(lost, 4), [end_event("709:1", {"inv.orders": 1})]])
    catalog = catalog_at(tmp_path)
    sink = sink_for(catalog, tmp_path, transactions="debezium", transaction_hold_batches=2)
    with caplog.at_level(logging.WARNING, logger="stream_sink"):
        run(spark, tmp_path, sink, held=True, states=[])
    metrics = sink.transaction_metrics
    assert metrics is not None and metrics.forced_transactions == 1
    assert "source transaction 701 held since batch 1" in caplog.text  # its END lost
    assert keys_by_table(catalog) == {t: {0, 1, 2} for t in TABLES}


def test_transaction_columns_without_the_hold_are_refused(spark: Any, tmp_path: Path) -> None:
    events, _ = transactions(1)
    write_batches(tmp_path / "in", [events])
    catalog = catalog_at(tmp_path)
    sink = sink_for(catalog, tmp_path)

    def foreach(df: Any, batch_id: int) -> None:
        changes = from_debezium(
            df, row_schema=TABLES, table_column="_table", key_column="key", transactions=True
        )
        sink.foreach_batch(changes, batch_id)

    with pytest.raises(Exception, match="pass transactions='debezium'"):
        try:
            checkpoint = sink.spark_checkpoint_location
            run_available(spark, tmp_path / "in", SOURCE_SCHEMA, foreach, checkpoint)
        finally:
            sink.close()
    assert not catalog.table_exists("inv.orders")
    plain = from_debezium(spark.createDataFrame([], SOURCE_SCHEMA), row_schema=TABLES)
    with pytest.raises(TransactionMetadataError, match=r"from_debezium.*transactions=True"):
        check_columns(plain.schema, gate=True)


KILL_JOB = Path(__file__).with_name("tx_kill_job.py")


@pytest.mark.slow
@pytest.mark.spread
def test_killed_around_the_hold_and_inside_the_tables_commit(tmp_path: Path) -> None:
    """Killed once the hold is durable and before any table records the batch, with a
    batch recorded in some tables only, inside the database transaction that swaps the
    three tables, in the restart's commit of what that left (one transaction of the three
    tables, not one table after another), after a swap, and at a random moment: after
    every kill the catalog shows whole transactions only, and the tables end exact, each
    batch committed once."""
    from kill_harness import KillJob, assert_committed_once, iceberg_marks, kill_rng

    events, final = transactions(16)
    write_batches(tmp_path / "in", cut(events, 5))
    catalog = sql_catalog_at(tmp_path)
    job = KillJob(KILL_JOB, [str(tmp_path)], log=tmp_path / "job.log", timeout=600)
    states = []
    for failpoint in (
        "after-held-write@2",
        "after-pending-write@2",  # the first table recorded the batch, the others not
        "inside-tables-swap@2",
        "after-table-commit@1",  # in the restart's commit of what the swap's kill left
        "after-tables-commit@1",
    ):
        job.killed_at(failpoint)
        states.append(keys_by_table(catalog))
    job.killed_mid_stream(kill_rng(38))
    states.append(keys_by_table(catalog))
    job.run_to_end()
    assert halves(states) == 0, states
    assert keys_by_table(catalog) == final
    for name in TABLES:
        assert_committed_once(iceberg_marks(catalog.load_table(name)), name)
