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
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "cdc")]

import pyarrow as pa  # noqa: E402
from cdc_stack import peer_jars  # noqa: E402
from debezium_pipeline import Job, Workload, source_rows, wait_until  # noqa: E402

import stream_sink as ss  # noqa: E402

MIRROR = pa.schema([pa.field("pk", pa.int64(), False), ("v", pa.string()), ("n", pa.int64())])


def read_env(directory: Path) -> dict[str, str]:
    lines = (directory / "env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def main(directory: Path) -> int:
    env = read_env(directory)
    props = json.loads(env["CATALOG_JSON"])
    catalog = ss.load_catalog("demo", **props)
    namespace = f"demo_{int(time.time())}"
    catalog.create_namespace(namespace)
    catalog.create_table(f"{namespace}.mirror", schema=MIRROR, identifier_fields=["pk"])
    root = directory / namespace
    root.mkdir()
    job_env = dict(
        os.environ,
        STREAM_SINK_CDC_CATALOG=env["CATALOG_JSON"],
        STREAM_SINK_CDC_TABLE=f"{namespace}.mirror",
        STREAM_SINK_CDC_MASTER=env["SPARK_MASTER"],
        SPARK_LOCAL_IP="127.0.0.1",
    )
    jars = os.environ.get("STREAM_SINK_SPARK_JARS") or ",".join(peer_jars("spark-kafka"))
    url, topic = env["POSTGRES_URL"], env["TOPIC"]
    workload = Workload(url, "public.source", seed=int(time.time()))

    def start() -> Job:
        return Job(root, env["KAFKA_BOOTSTRAP"], topic, "iceberg", jars, None, job_env)

    print(f"demo-cluster: streaming {topic} into {namespace}.mirror on {env['SPARK_MASTER']}")
    workload.run(20)  # the topic has events before the query subscribes to it
    job = start()
    try:
        job.wait_batches(1, timeout=600)
        workload.run(100)
        job.wait_batches(1)
        print(f"demo-cluster: {workload.done} changes so far; SIGKILL of the driver")
        job.kill()
        workload.run(100)
        job = start()
        job.wait_batches(1, timeout=600)
        workload.run(100)
        print(f"demo-cluster: {workload.done} changes in all; waiting for the table")

        def equal() -> bool:
            rows = catalog.load_table(f"{namespace}.mirror").scan().to_arrow().to_pylist()
            got = sorted((r["pk"], r["v"], r["n"]) for r in rows)
            return got == source_rows(url, "public.source")

        wait_until(equal, 600, "the table did not catch up with public.source")
    finally:
        job.stop()
    n = len(source_rows(url, "public.source"))
    print(f"demo-cluster: OK, {namespace}.mirror equals public.source ({n} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
