"""The CDC demo on the local cluster (scripts/cluster.sh): a workload of inserts, updates
(primary-key changes among them) and deletes in PostgreSQL's public.source, streamed by
Debezium through Kafka into an Iceberg table of SeaweedFS's REST catalog by a driver on
the Spark master, which is SIGKILLed mid-stream and restarted; at the end the table must
equal ``SELECT * FROM public.source ORDER BY pk``. Exit 0 when it does.

    python scripts/demo_cluster.py CLUSTER_DIR      (make demo-cluster runs it)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "cdc")]

import pyarrow as pa  # noqa: E402
from cdc_stack import peer_jars  # noqa: E402
from debezium_pipeline import Job, Workload, source_rows  # noqa: E402

import stream_sink as ss  # noqa: E402

MIRROR = pa.schema([pa.field("pk", pa.int64(), False), ("v", pa.string()), ("n", pa.int64())])


def read_env(directory: Path) -> dict[str, str]:
    lines = (directory / "env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def table_rows(catalog: Any, table: str) -> list[tuple]:
    rows = catalog.load_table(table).scan().to_arrow().to_pylist()
    return sorted((r["pk"], r["v"], r["n"]) for r in rows)


def difference(got: list[tuple], want: list[tuple]) -> str:
    """How the table's rows differ from the source's, in a few words."""
    ours, theirs = set(got), set(want)
    dup = len(got) - len(ours)
    return (
        f"{len(theirs - ours)} source rows missing or different, {len(ours - theirs)} rows "
        f"not in the source, {dup} duplicates ({len(got)} rows against {len(want)})"
    )


def check(catalog: Any, table: str, url: str, timeout_s: float) -> int:
    """Wait until ``table`` equals ``SELECT * FROM public.source ORDER BY pk``; its row
    count. Exit 1 naming the difference when it does not within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        want = source_rows(url, "public.source")
        got = table_rows(catalog, table)
        if got == want:
            return len(want)
        if time.monotonic() > deadline:
            raise SystemExit(
                f"demo-cluster: FAILED, {table} does not equal public.source after "
                f"{timeout_s:.0f} s: {difference(got, want)}"
            )
        time.sleep(2)


def main(directory: Path) -> int:
    started = time.monotonic()
    env = read_env(directory)
    props = json.loads(env["CATALOG_JSON"])
    catalog = ss.load_catalog("demo", **props)
    namespace = f"demo_{int(time.time())}"
    table = f"{namespace}.mirror"
    catalog.create_namespace(namespace)
    catalog.create_table(table, schema=MIRROR, identifier_fields=["pk"])
    root = directory / namespace
    root.mkdir()
    job_env = dict(
        os.environ,
        STREAM_SINK_CDC_CATALOG=env["CATALOG_JSON"],
        STREAM_SINK_CDC_TABLE=table,
        STREAM_SINK_CDC_MASTER=env["SPARK_MASTER"],
        SPARK_LOCAL_IP="127.0.0.1",
    )
    jars = os.environ.get("STREAM_SINK_SPARK_JARS") or ",".join(peer_jars("spark-kafka"))
    url, topic = env["POSTGRES_URL"], env["TOPIC"]
    workload = Workload(url, "public.source", seed=int(time.time()))

    def start() -> Job:
        return Job(root, env["KAFKA_BOOTSTRAP"], topic, "iceberg", jars, None, job_env)

    print(f"demo-cluster: streaming {topic} into {table} on {env['SPARK_MASTER']}")
    print(f"demo-cluster: the driver's log is {root / 'job.log'}", flush=True)
    workload.run(20)  # the topic has events before the query subscribes to it
    job = start()
    try:
        job.wait_batches(1, timeout=600)
        workload.run(100)
        job.wait_batches(1)
        print(f"demo-cluster: {workload.done} changes so far; SIGKILL of the driver", flush=True)
        job.kill()
        workload.run(100)
        job = start()
        job.wait_batches(1, timeout=600)
        workload.run(100)
        print(f"demo-cluster: {workload.done} changes in all; waiting for the table", flush=True)
        n = check(catalog, table, url, timeout_s=600)
    finally:
        job.stop()
    if n == 0:  # an empty table equals an empty source: that proves nothing
        raise SystemExit("demo-cluster: FAILED, public.source is empty")
    print(
        f"demo-cluster: OK, {table} equals SELECT * FROM public.source ORDER BY pk "
        f"({n} rows, {workload.done} changes, driver killed once) in "
        f"{time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    # SIGTERM as Ctrl-C: the driver, in a process group of its own, is stopped on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main(Path(sys.argv[1])))
