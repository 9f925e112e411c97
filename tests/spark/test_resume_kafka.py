"""stream_sink.commit.source_position with Spark's Kafka source: a driver killed with a
batch staged but not committed, its Spark checkpoint deleted (and, in the second case,
the sink's state and checkpoints too), then the stream recovered from the table as
docs/operations.md says (``stream-sink status --table``, a new checkpoint location,
``startingOffsets`` and ``resume_from_table``): every record once, no gap. A wrong start
is refused with SourcePositionError and changes nothing. Iceberg and Delta targets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
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


def _status(root: Path, target: str, *extra: str) -> str:
    table = ["--table", str(root / "delta")] if target == "delta" else ["--table", "db.events"]
    args = ["status", *table, "--warehouse", str(root / "warehouse"), *extra]
    proc = subprocess.run(
        [sys.executable, "-m", "stream_sink.cli.main", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def _rows(root: Path, target: str) -> list[dict[str, Any]]:
    if target == "delta":
        return list(DeltaTable.load(str(root / "delta")).to_arrow().to_pylist())
    catalog = ss.load_catalog("t", type="hadoop", warehouse=str(root / "warehouse"))
    return list(catalog.load_table("db.events").scan().to_arrow().to_pylist())


def _ids(root: Path, target: str) -> list[int]:
    return [r["id"] for r in _rows(root, target)]


def _commits(root: Path, target: str) -> list[tuple[str, int]]:
    """(job, batch) of each commit of the sink, oldest first."""
    if target == "delta":
        found = positions(DeltaTable.load(str(root / "delta")).log)
        return [(p.job_id, p.batch_id) for p in reversed(list(found))]
    catalog = ss.load_catalog("t", type="hadoop", warehouse=str(root / "warehouse"))
    return [
        (s.summary["stream-sink.job-id"], int(s.summary["stream-sink.max-committed-checkpoint-id"]))
        for s in catalog.load_table("db.events").snapshots()
    ]


@pytest.mark.parametrize(
    ("target", "lost", "mode"),
    [
        ("iceberg", "spark checkpoint", "append"),
        ("iceberg", "spark checkpoint, state and checkpoints", "append"),
        ("iceberg", "spark checkpoint", "upsert"),
        ("delta", "spark checkpoint", "append"),
    ],
)
def test_a_lost_checkpoint_is_recovered_from_the_table_exactly_once(
    kafka: Any, jars: str, tmp_path: Path, target: str, lost: str, mode: str
) -> None:
    topic = f"events-{target}-{mode}-{len(lost)}"
    kafka.create_topic(topic, partitions=2)
    upsert = mode == "upsert"
    keys = [i % KEYS if upsert else i for i in range(RECORDS)]
    values = [f"{k},v{i}" if upsert else str(k) for i, k in enumerate(keys)]
    kafka.produce(topic, [(str(k), v) for k, v in zip(keys, values, strict=True)])
    if target == "iceberg":
        catalog = ss.load_catalog("t", type="hadoop", warehouse=str(tmp_path / "warehouse"))
        catalog.create_namespace("db")
        if upsert:
            schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
            catalog.create_table("db.events", schema, identifier_fields=["id"])
        else:
            catalog.create_table("db.events", pa.schema([("id", pa.int64())]))

    def job(checkpoint: str, *resume: str) -> KillJob:
        env = {
            **os.environ,
            "STREAM_SINK_SPARK_JARS": jars,
            "STREAM_SINK_RESUME_TARGET": target,
            "STREAM_SINK_RESUME_MODE": mode,
        }
        args = [str(tmp_path), kafka.bootstrap, topic, checkpoint, *resume]
        return KillJob(JOB, args, env=env, log=tmp_path / "job.log")

    # batches 0 and 1 committed, batch 2 staged in the sink's state when the driver dies
    job("ck1").killed_at("after-staged-write@3")
    shutil.rmtree(tmp_path / "ck1" / "spark")
    if lost != "spark checkpoint":
        shutil.rmtree(tmp_path / "ck1")
        shutil.rmtree(tmp_path / "state")

    position = json.loads(_status(tmp_path, target, "--format", "jsonl"))
    assert position["batch_id"] == 1
    starting = _status(tmp_path, target, "--starting-offsets")
    ends = json.loads(starting)[topic]
    committed = sum(ends.values())  # batches 0 and 1: at most five records each
    assert 0 < committed <= 10 and set(ends) == {"0", "1"}
    ids = _ids(tmp_path, target)
    assert len(ids) == len(set(ids))
    if not upsert:
        assert len(ids) == committed  # batch 2 is staged, not committed

    refused = job("ck-wrong", position["resume_from_table"], "earliest")
    code, out = refused.run()
    log = (tmp_path / "job.log").read_text()
    assert code != 0 and "done" not in out, out
    assert "SourcePositionError" in log and "the new query starts at" in log
    assert sorted(_ids(tmp_path, target)) == sorted(ids)  # the refused query changed nothing

    job("ck2", position["resume_from_table"], starting).run_to_end()
    if upsert:  # equal to the source: each key's last value
        last = {k: v.split(",")[1] for k, v in zip(keys, values, strict=True)}
        assert sorted((r["id"], r["v"]) for r in _rows(tmp_path, target)) == sorted(last.items())
    else:
        assert sorted(_ids(tmp_path, target)) == list(range(RECORDS))
    commits = _commits(tmp_path, target)
    for job_id in dict.fromkeys(j for j, _ in commits):
        assert_committed_once([b for j, b in commits if j == job_id], job_id)
    assert len(dict.fromkeys(j for j, _ in commits)) == 2
    final = json.loads(_status(tmp_path, target, "--starting-offsets"))[topic]
    assert sum(final.values()) == RECORDS
