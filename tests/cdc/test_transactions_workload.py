"""One source transaction, one state across tables (issue #38), end to end: a shop in
PostgreSQL (``shop_workload.py``: orders, their lines and the stock, changed together in
multi-table transactions) → Debezium with ``provide.transaction.metadata=true`` → Kafka
→ one routed sink per catalog writing three Iceberg tables, on Nessie's Iceberg REST
catalog and on the SQL catalog in PostgreSQL, both of which commit a routed checkpoint's
tables atomically.

One driver (``shop_job.py``) runs two queries per catalog on the same source
transactions, with a small ``maxOffsetsPerTrigger`` so micro-batches cut source
transactions:

- ``-tx``: the transaction topic read in the same query,
  ``from_debezium(..., transactions=True)`` and ``IcebergSink(transactions="debezium")``,
  which commits only complete source transactions.
- ``-plain`` (the contrast, what a sink does today): the data topics only.

The driver is SIGKILLed mid-stream and restarted on the same checkpoints with larger
micro-batches (they still cut source transactions; the stream catches up sooner).

A reader per target (``consistent_reader.py``) polls the catalog all along, reads each
state through the sink's consistent read and checks the invariants across the three
tables. With transactions no state it observes breaks them; without, micro-batch
boundaries cut transactions and it sees states that do (the counts are printed: the
contrast must find some). At the end every target's three tables equal PostgreSQL's,
read by ours and by DuckDB, and no checkpoint was committed twice.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cdc_stack import Connect, Stack
from consistent_reader import Observer, Target
from debezium_pipeline import ScriptJob, sql
from kill_harness import assert_committed_once
from shop_job import SINK_ID, topics
from shop_workload import DDL, TABLES, ShopWorkload, as_tuples, source_state

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # real JVMs: minutes on a busy machine

PREFIX = "shop"
JOB = Path(__file__).with_name("shop_job.py")
MAX_OFFSETS, RESTART_MAX_OFFSETS = 50, 150
"""Kafka records per micro-batch and query, over four topics (a source transaction is
three to fourteen change events, and its BEGIN and END), before and after the kill."""
WORKLOAD_S, RATE = 40.0, 4.0
"""How long the shop runs, and about how many transactions a second."""
MIN_STATES = 8
"""States each ``-tx`` reader must observe: about two thirds of the checkpoints the two
runs commit (a state that lasts less than a poll goes unseen)."""
CATCH_UP_S = 420
SQL_CATALOG = "shop"


@pytest.fixture(scope="module")
def shop(cdc_stack: Stack) -> Iterator[Connect]:
    """The shop's tables, empty, and Debezium on them with transaction metadata; every
    topic the jobs subscribe to exists before they start."""
    sql(cdc_stack.postgres.url, *DDL)
    for topic in topics(PREFIX, transactions=True):
        cdc_stack.kafka.create_topic(topic)
    connect = Connect(
        cdc_stack.directory / "connect-shop",
        cdc_stack.kafka.jars,
        cdc_stack.kafka,
        cdc_stack.postgres,
        tables=r"public\.(orders|lines|stock)",
        topic_prefix=PREFIX,
        name="shop",
        schemas=False,
        overrides={"provide.transaction.metadata": "true"},
    )
    try:
        yield connect.start()
    finally:
        connect.stop()


def sql_catalog(stack: Stack, warehouse: Path) -> dict[str, str]:
    """A SQL catalog in a database of its own on the stack's PostgreSQL (logical decoding
    is per database: the catalog's commits stay out of the change stream)."""
    sql(stack.postgres.url, "CREATE DATABASE shop_catalog")
    uri = stack.postgres.url.rsplit("/", 1)[0] + "/shop_catalog"
    return {"type": "sql", "uri": uri, "warehouse": str(warehouse)}


def targets(root: Path, nessie: dict[str, str], sql_props: dict[str, str]) -> list[Target]:
    """Both catalogs, each with the transactional job's tables (``public``) and the
    contrast's (``plain``)."""
    catalogs = (("nessie", "nessie", nessie), ("sql", SQL_CATALOG, sql_props))
    return [
        Target(
            f"{kind}-{mode}",
            name,
            props,
            namespace,
            SINK_ID,
            str(root / f"{kind}-{mode}" / "spark"),
        )
        for mode, namespace in (("tx", "public"), ("plain", "plain"))
        for kind, name, props in catalogs
    ]


def job(root: Path, stack: Stack, chosen: list[Target], jars: str, run: int) -> ScriptJob:
    """The shop's driver writing every target (``-tx`` ones with the hold), run ``run``."""
    spec = [
        {"name": t.name, "catalog_name": t.catalog_name, "catalog": dict(t.catalog),
         "namespace": t.namespace, "transactions": t.name.endswith("-tx")}
        for t in chosen
    ]  # fmt: skip
    env = dict(os.environ, STREAM_SINK_SHOP_TARGETS=json.dumps(spec))
    max_offsets = MAX_OFFSETS if run == 0 else RESTART_MAX_OFFSETS
    args = [str(root), stack.kafka.bootstrap, PREFIX, str(max_offsets)]
    return ScriptJob(JOB, args, root / f"run-{run}.log", jars, env)


def current(target: Target) -> dict[str, list[tuple[Any, ...]]]:
    """The target's three tables as our reader reads them at their current snapshots."""
    catalog = target.open_catalog()
    try:
        return {
            t: as_tuples(
                t, catalog.load_table(f"{target.namespace}.{t}").scan().to_arrow().to_pylist()
            )
            for t in TABLES
        }
    finally:
        catalog.close()


def behind(targets: list[Target], want: dict[str, list[tuple[Any, ...]]]) -> list[str]:
    """What each target that does not equal ``want`` (PostgreSQL's tables) holds: per
    table, its row count, the source's, and how many rows of either the other lacks."""
    from stream_sink.exceptions import NoSuchTableError

    out = []
    for target in targets:
        try:
            got = current(target)
        except NoSuchTableError as e:
            out.append(f"{target.name}: {e}")
            continue
        if got != want:
            diff = {t: (len(got[t]), len(want[t]), len(set(got[t]) ^ set(want[t]))) for t in TABLES}
            out.append(f"{target.name}: (rows, source rows, rows not in both) {diff}")
    return out


def wait_caught_up(targets: list[Target], want: dict[str, Any], jobs: list[ScriptJob]) -> None:
    """Wait until every target equals ``want``; fail saying what each holds."""
    deadline = time.monotonic() + CATCH_UP_S
    while lagging := behind(targets, want):
        for running in jobs:
            assert running.proc.poll() is None, f"job exited:\n{running.log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, "\n".join(["not caught up:", *lagging])
        time.sleep(2)


def duckdb_state(target: Target) -> dict[str, list[tuple[Any, ...]]]:
    """The target's three tables as DuckDB reads them (through Nessie's REST catalog, or
    the SQL catalog's current metadata files)."""
    from readers import duckdb_rest_rows, duckdb_rows

    if target.catalog["type"] == "rest":
        uri, warehouse = target.catalog["uri"], target.catalog["warehouse"]
        return {
            t: as_tuples(t, duckdb_rest_rows(uri, warehouse, target.namespace, t)) for t in TABLES
        }
    catalog = target.open_catalog()
    try:
        return {
            t: as_tuples(
                t, duckdb_rows(catalog.load_table(f"{target.namespace}.{t}").metadata_location)
            )
            for t in TABLES
        }
    finally:
        catalog.close()


def holds(runs: list[ScriptJob]) -> list[str]:
    """Each run's last ``hold`` line per target: what its driver held, forced out and
    completed."""
    out = []
    for i, run in enumerate(runs):
        last = {line.split()[1]: line for line in list(run.lines) if line.startswith("hold ")}
        out += [f"run {i}: {line}" for line in last.values()]
    return out


def committed_once(target: Target) -> None:
    """No checkpoint of the query is committed twice to any of the target's tables (the
    SQL catalog keeps every snapshot; Nessie's metadata lists only the current one)."""
    from stream_sink.commit.consistent import routed_operator_id
    from stream_sink.commit.iceberg.consistent import stamped_snapshots
    from stream_sink.spark.query import read_query_id

    job_id = read_query_id(target.spark_checkpoint)
    catalog = target.open_catalog()
    try:
        for name in target.tables():
            operator = routed_operator_id(SINK_ID, name)
            stamps = stamped_snapshots(catalog.load_table(name), job_id, operator)
            assert_committed_once(reversed([s for s, _ in stamps]), name)
    finally:
        catalog.close()


def test_one_source_transaction_is_one_state_across_tables_on_nessie_and_sql(
    shop: Connect, kafka_spark: Any, cdc_stack: Stack, nessie: Any, vending_seaweed: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    jars = kafka_spark.conf.get("spark.jars")
    nessie_props = {"type": "rest", **nessie.rest_props(vending_seaweed.s3_props["s3.region"])}
    every = targets(tmp_path, nessie_props, sql_catalog(cdc_stack, tmp_path / "warehouse"))
    tx_targets = [t for t in every if t.name.endswith("-tx")]
    plain_targets = [t for t in every if t.name.endswith("-plain")]
    observers = {
        t.name: Observer(t, interval=0.5 if t in tx_targets else 1.0).start() for t in every
    }
    workload = ShopWorkload(cdc_stack.postgres.url, seed=38)
    halt = threading.Event()
    writer = threading.Thread(target=workload.run, args=(halt, WORKLOAD_S, RATE), daemon=True)
    driver = job(tmp_path, cdc_stack, every, jars, run=0)
    runs = [driver]
    killed = None
    try:
        driver.wait_line("started")
        writer.start()
        driver.wait_batches(8, prefix="batch sql-tx ")
        driver.kill()  # mid-stream, while the shop goes on
        killed = driver.proc.returncode
        driver = job(tmp_path, cdc_stack, every, jars, run=1)  # the same checkpoints
        runs.append(driver)
        writer.join()
        want = source_state(cdc_stack.postgres.url)
        wait_caught_up(every, want, [driver])
    finally:
        halt.set()
        if writer.ident is not None:
            writer.join(60)
        for observer in observers.values():
            observer.stop()
        driver.stop()
        reports = [o.report() for o in observers.values()]
        print(f"\nshop: {workload.done.total} transactions {dict(workload.done)}", *reports,
              *holds(runs), sep="\n")  # fmt: skip

    assert killed is not None and killed < 0
    assert workload.done.total > 100 and len(want["orders"]) > 20
    for target in every:  # ours above, DuckDB here
        assert duckdb_state(target) == want, target.name
        if target.catalog["type"] == "sql":
            committed_once(target)
    for target in tx_targets:
        seen = observers[target.name]
        assert not seen.errors, seen.errors[:3]
        assert not seen.violating, seen.report()
        assert len(seen.states) >= MIN_STATES, seen.report()
    for target in plain_targets:  # today's count: micro-batches cut source transactions
        seen = observers[target.name]
        assert not seen.errors, seen.errors[:3]
        assert seen.violating, seen.report()
