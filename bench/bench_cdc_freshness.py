"""End-to-end freshness of the CDC pipeline: PostgreSQL commit → Debezium → Kafka →
Spark's Kafka source → ``from_debezium`` → IcebergSink (upsert), until the change is
readable in the Iceberg table.

Run: ``python bench/bench_cdc_freshness.py [rates] [seconds] [trigger] [writers] [--cluster]``
(defaults ``5,20,50,100`` changes per second, 40 s each, trigger ``1 second``, 1 writer).
The sink runs on ``local[2]`` with a Hadoop catalog on local disk, or with ``--cluster``
as on ``scripts/cluster.sh``: on a Spark standalone cluster of two workers (1 core, 1 GiB
each) into a table of SeaweedFS's Iceberg REST catalog, which the reader polls too.

Writers commit single-row updates at a steady rate, each stamping its sequence number
into the row (50 keys, round robin) and noting its commit time; a reader polls the table
(through the sink's catalog) and, for every sequence number newly visible, records
commit → visible. A key's updates commit in order (one writer per key), so a key that
shows a number has shown all its earlier ones. Per rate it prints p50 and p99
freshness, the ratio of p50 to the lowest rate's (the baseline, same session), and
whether the rate was held: the last third's median freshness within 1.5 times (+1 s)
the first third's, and the backlog drained within 30 s of the writers stopping.
``writers`` connections (default 1) share the rate, each the only writer of its keys;
one connection's single-row commits top out near 2,000-2,500 changes/s here. Each rate
line prints the rate the writers made (``writer-bound`` when below the one asked). The
highest rate held is printed last, with peak memory (this process, its children).
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "cdc")]

import pyarrow as pa  # noqa: E402
from cdc_stack import (  # noqa: E402
    CLUSTER_BUCKETS,
    CLUSTER_TABLE_BUCKETS,
    SPARK_WORKERS,
    _load,
    peer_jars,
    running_stack,
)
from debezium_pipeline import SINK_OPTIONS, kafka_stream, sql, start  # noqa: E402

import stream_sink as ss  # noqa: E402
from stream_sink.spark import IcebergSink, local_session  # noqa: E402

KEYS = 50
ROW_SCHEMA = "pk bigint, v string, n bigint"


def write_steadily(
    url: str, rate: float, seconds: float, first: int, commits: dict, writers: int
) -> list[int]:
    """Commit ``rate`` updates per second for ``seconds`` from ``writers`` connections, each
    the only writer of its keys (so a key's updates commit in sequence order); the
    sequence numbers written."""
    count = int(rate * seconds)
    done: list[list[int]] = [[] for _ in range(writers)]

    def write(i: int) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for n in range(first, first + count):
                if (n % KEYS) % writers != i:
                    continue
                wait = t0 + (n - first) / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                elif time.monotonic() - t0 >= seconds:
                    return  # behind schedule and out of time: this rate is writer-bound
                conn.execute("UPDATE fresh SET n = %s WHERE pk = %s", (n, n % KEYS))
                commits[n] = time.time()
                done[i].append(n)

    t0 = time.monotonic()
    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(n for ns in done for n in ns)


class Reader(threading.Thread):
    """Polls the table; ``seen[n]`` is when sequence number n became visible. A key's
    updates commit in sequence order (one writer per key), so a key showing ``n`` has
    shown every earlier number of that key."""

    def __init__(self, catalog: Any) -> None:
        super().__init__(daemon=True)
        self.catalog, self.high, self.stop = catalog, -1, threading.Event()
        self.seen: dict[int, float] = {}
        self.by_key = {k: k - KEYS for k in range(KEYS)}

    def run(self) -> None:
        while not self.stop.is_set():
            t = self.catalog.load_table("db.fresh").scan().to_arrow()
            now = time.time()
            for pk, n in zip(t.column("pk").to_pylist(), t.column("n").to_pylist(), strict=True):
                for m in range(self.by_key[pk] + KEYS, n + 1, KEYS):
                    self.seen[m] = now
                self.by_key[pk] = max(self.by_key[pk], n)
                self.high = max(self.high, n)
            time.sleep(0.2)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


@contextmanager
def topology(root: Path, cluster: bool) -> Iterator[tuple[dict[str, str], str]]:
    """The catalog's properties and the Spark master the sink runs on: a Hadoop catalog
    on local disk and ``local[2]``, or (``cluster``) the parts ``scripts/cluster.sh`` adds
    to the stack: SeaweedFS with its Iceberg REST catalog and a standalone Spark cluster."""
    if not cluster:
        yield {"type": "hadoop", "warehouse": str(root / "wh")}, "local[2]"
        return
    from seaweed_server import SeaweedServer

    spark_cluster = _load("spark_cluster", REPO / "tests" / "spark" / "cluster.py")
    weed = SeaweedServer.start(
        root / "seaweed", buckets=CLUSTER_BUCKETS, table_buckets=CLUSTER_TABLE_BUCKETS
    )
    try:
        with spark_cluster.standalone_cluster(root / "spark", SPARK_WORKERS) as master:
            yield {"type": "rest", **weed.rest_props(CLUSTER_TABLE_BUCKETS[0])}, master
    finally:
        weed.stop()


def main(rates: list[float], seconds: float, trigger: str, writers: int, cluster: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-cdc-"))
    with (
        running_stack(root, schemas=False, tables="public.fresh") as stack,
        topology(root, cluster) as (props, master),
    ):
        url = stack.postgres.url
        sql(
            url,
            "CREATE TABLE fresh (pk bigint PRIMARY KEY, v text, n bigint)",
            f"INSERT INTO fresh SELECT g, 'k' || g, -1 FROM generate_series(0, {KEYS - 1}) g",
        )
        connect = stack.start_connect()
        catalog = ss.load_catalog("b", **props)
        catalog.create_namespace("db")
        schema = pa.schema(
            [pa.field("pk", pa.int64(), False), ("v", pa.string()), ("n", pa.int64())]
        )
        catalog.create_table("db.fresh", schema=schema, identifier_fields=["pk"])
        jars = ",".join(peer_jars("spark-kafka"))
        spark = local_session("bench-cdc", master=master, conf={"spark.jars": jars})
        sink = IcebergSink(
            catalog=catalog,
            table="db.fresh",
            checkpoint_location=str(root / "chk"),
            state_dir=str(root / "state"),
            **SINK_OPTIONS,
        )
        df = kafka_stream(spark, stack.kafka.bootstrap, connect.topic("public.fresh"))
        query = start(df, sink, row_schema=ROW_SCHEMA, processing_time=trigger)
        reader = Reader(catalog)
        reader.start()
        while reader.high < -1 or len(catalog.load_table("db.fresh").scan().to_arrow()) < KEYS:
            time.sleep(1)  # the snapshot is in
        print(
            f"{master}, {props['type']} catalog; trigger {trigger}; {seconds:.0f} s per rate; "
            f"{KEYS} keys; {writers} writer connection(s)",
            flush=True,
        )
        commits: dict[int, float] = {}
        n, results, baseline = 0, [], None
        for rate in rates:
            first = n
            written = write_steadily(url, rate, seconds, first, commits, writers)
            n = first + int(rate * seconds)
            drained = time.monotonic() + 30
            while time.monotonic() < drained and any(i not in reader.seen for i in written):
                time.sleep(0.2)
            lags = [reader.seen[i] - commits[i] for i in written if i in reader.seen]
            third = max(1, len(lags) // 3)
            held = (
                len(lags) == len(written)
                and statistics.median(lags[-third:]) <= 1.5 * statistics.median(lags[:third]) + 1
            )
            p50, p99 = pct(lags, 0.5), pct(lags, 0.99) if lags else (float("nan"),) * 2
            baseline = baseline or p50
            made = len(written) / seconds  # what the writers reached
            results.append((made, held))
            print(
                f"rate {rate:6.1f}/s  made {made:7.1f}/s  changes {len(written):6d}  "
                f"freshness p50 {p50:6.2f} s  p99 {p99:6.2f} s  p50/baseline "
                f"{p50 / baseline:5.2f}  {'held' if held else 'FELL BEHIND'}"
                f"{'  (writer-bound)' if made < 0.95 * rate else ''}",
                flush=True,
            )
        reader.stop.set()
        query.stop()
        sink.close()
        best = max((r for r, held in results if held), default=0.0)
        self_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        kids_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"highest rate held: {best:.1f} changes/s made (trigger {trigger})")
        print(f"peak memory: this process {self_mb:.0f} MiB, largest child {kids_mb:.0f} MiB")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--cluster"]
    rates = [float(r) for r in (args[0] if args else "5,20,50,100").split(",")]
    seconds = float(args[1]) if len(args) > 1 else 40.0
    trigger = args[2] if len(args) > 2 else "1 second"
    writers = int(args[3]) if len(args) > 3 else 1
    main(rates, seconds, trigger, writers, "--cluster" in sys.argv[1:])
