"""stream_sink.commit.source_position with Spark's Kafka source: a driver killed with a
batch staged but not committed, its Spark checkpoint deleted (and, in the second case,
the sink's state and checkpoints too), then the stream recovered from the table as
docs/operations.md says (``stream-sink status --table``, a new checkpoint location,
``startingOffsets`` and ``resume_from_table``): every appended record once, every upserted
key's last value, no gap. A wrong start is refused with SourcePositionError and changes
nothing. Append and upsert into Iceberg tables behind Apache Iceberg's own REST catalog
server and into Delta tables."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kill_harness import KillJob, assert_committed_once

import stream_sink as ss
from stream_sink.commit.delta.source_position import positions
from stream_sink.delta import DeltaTable

JOB = Path(__file__).with_name("resume_kafka_job.py")
RECORDS = 40
KEYS = 15
pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from cdc_stack import Kafka, StackError, peer_jars

    try:
        broker = Kafka(tmp_path_factory.mktemp("kafka"), peer_jars("kafka-debezium"))
    except StackError as e:
        pytest.skip(f"the Kafka jars cannot be resolved: {e}")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def jars() -> str:
    from spark_jars import spark_kafka_jars

    found = spark_kafka_jars()
    if not found:
        pytest.skip("Spark's Kafka source (peer set spark-kafka) could not be resolved")
    return found


@dataclass
class Target:
    """Where the job writes: the Delta table ROOT/delta, or an Iceberg table ``name``
    behind Apache Iceberg's own REST catalog server (``props``: its ``load_catalog``
    arguments)."""

    kind: str
    root: Path
    props: dict[str, Any]
    name: str = ""

    def catalog(self) -> Any:
        return ss.load_catalog("t", **self.props)

    def status(self, *extra: str) -> str:
        """``stream-sink status --table`` as a user types it."""
        if self.kind == "delta":
            table = ["--table", str(self.root / "delta")]
        else:
            table = ["--table", self.name, "--catalog-type", "rest"]
            table += ["--catalog-uri", self.props["uri"]]
        proc = subprocess.run(
            [sys.executable, "-m", "stream_sink.cli.main", "status", *table, *extra],
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stdout.strip()

    def rows(self) -> list[dict[str, Any]]:
        if self.kind == "delta":
            return list(DeltaTable.load(str(self.root / "delta")).to_arrow().to_pylist())
        return list(self.catalog().load_table(self.name).scan().to_arrow().to_pylist())

    def ids(self) -> list[int]:
        return [r["id"] for r in self.rows()]

    def commits(self) -> list[tuple[str, int]]:
        """(job, batch) of each commit of the sink, oldest first."""
        if self.kind == "delta":
            found = positions(DeltaTable.load(str(self.root / "delta")).log)
            return [(p.job_id, p.batch_id) for p in reversed(list(found))]
        snapshots = self.catalog().load_table(self.name).snapshots()
        key = "stream-sink.max-committed-checkpoint-id"
        return [(s.summary["stream-sink.job-id"], int(s.summary[key])) for s in snapshots]


def _target(request: pytest.FixtureRequest, kind: str, root: Path, upsert: bool) -> Target:
    """The job's target; an Iceberg table is created in a namespace of its own."""
    if kind == "delta":
        return Target("delta", root, {})
    server = request.getfixturevalue("iceberg_rest")
    ns = f"resume{uuid.uuid4().hex[:8]}"
    target = Target("iceberg", root, {"type": "rest", "uri": server.uri}, f"{ns}.events")
    catalog = target.catalog()
    catalog.create_namespace(ns)
    if upsert:
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
        catalog.create_table(target.name, schema, identifier_fields=["id"])
    else:
        catalog.create_table(target.name, pa.schema([("id", pa.int64())]))
    return target


@pytest.mark.parametrize(
    ("target", "lost", "mode"),
    [
        ("iceberg", "spark checkpoint", "append"),
        ("iceberg", "spark checkpoint, state and checkpoints", "append"),
        ("iceberg", "spark checkpoint", "upsert"),
        ("delta", "spark checkpoint", "append"),
        ("delta", "spark checkpoint, state and checkpoints", "upsert"),
    ],
)
def test_a_lost_checkpoint_is_recovered_from_the_table_exactly_once(
    request: pytest.FixtureRequest,
    kafka: Any,
    jars: str,
    tmp_path: Path,
    target: str,
    lost: str,
    mode: str,
) -> None:
    topic = f"events-{target}-{mode}-{len(lost)}"
    kafka.create_topic(topic, partitions=2)
    upsert = mode == "upsert"
    keys = [i % KEYS if upsert else i for i in range(RECORDS)]
    values = [f"{k},v{i}" if upsert else str(k) for i, k in enumerate(keys)]
    kafka.produce(topic, [(str(k), v) for k, v in zip(keys, values, strict=True)])
    into = _target(request, target, tmp_path, upsert)

    def job(checkpoint: str, *resume: str) -> KillJob:
        env = {
            **os.environ,
            "STREAM_SINK_SPARK_JARS": jars,
            "STREAM_SINK_RESUME_TARGET": target,
            "STREAM_SINK_RESUME_MODE": mode,
            "STREAM_SINK_RESUME_CATALOG": json.dumps(into.props),
            "STREAM_SINK_RESUME_TABLE": into.name,
        }
        args = [str(tmp_path), kafka.bootstrap, topic, checkpoint, *resume]
        return KillJob(JOB, args, env=env, log=tmp_path / "job.log")

    # batches 0 and 1 committed, batch 2 staged in the sink's state when the driver dies
    job("ck1").killed_at("after-staged-write@3")
    shutil.rmtree(tmp_path / "ck1" / "spark")
    if lost != "spark checkpoint":
        shutil.rmtree(tmp_path / "ck1")
        shutil.rmtree(tmp_path / "state")

    position = json.loads(into.status("--format", "jsonl"))
    assert position["batch_id"] == 1
    starting = into.status("--starting-offsets")
    ends = json.loads(starting)[topic]
    committed = sum(ends.values())  # batches 0 and 1: at most five records each
    assert 0 < committed <= 10 and set(ends) == {"0", "1"}
    ids = into.ids()
    assert len(ids) == len(set(ids))
    if not upsert:
        assert len(ids) == committed  # batch 2 is staged, not committed

    refused = job("ck-wrong", position["resume_from_table"], "earliest")
    code, out = refused.run()
    log = (tmp_path / "job.log").read_text()
    assert code != 0 and "done" not in out, out
    assert "SourcePositionError" in log and "the new query starts at" in log
    assert sorted(into.ids()) == sorted(ids)  # the refused query changed nothing

    job("ck2", position["resume_from_table"], starting).run_to_end()
    if upsert:  # equal to the source: each key's last value
        last = {k: v.split(",")[1] for k, v in zip(keys, values, strict=True)}
        assert sorted((r["id"], r["v"]) for r in into.rows()) == sorted(last.items())
    else:
        assert sorted(into.ids()) == list(range(RECORDS))
    commits = into.commits()
    for job_id in dict.fromkeys(j for j, _ in commits):
        assert_committed_once([b for j, b in commits if j == job_id], job_id)
    assert len(dict.fromkeys(j for j, _ in commits)) == 2
    final = json.loads(into.status("--starting-offsets"))[topic]
    assert sum(final.values()) == RECORDS
