"""The kill test on a REST catalog: the append and upsert streams of ``kill_job.py`` into
tables of SeaweedFS's Iceberg REST catalog (tables on its S3), the sink's checkpoints on
``s3://``; killed inside the commit protocol and at a random moment, then run to the end.
Every appended row exactly once and every key's last value, read by our reader and by
DuckDB attaching the same REST catalog."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kill_harness import assert_committed_once, iceberg_marks, kill_rng
from test_kill import APPEND_ROWS, kill_job, write_input
from test_rest_sink import duckdb_rest_rows

FILES = 5
pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.timeout(1500)
def test_sigkill_and_restart_exactly_once_on_a_rest_catalog(
    tmp_path: Path, seaweed: Any, rest_catalog: Any
) -> None:
    ns = rest_catalog.test_namespace
    rest_catalog.create_table(
        f"{ns}.events", pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())])
    )
    rest_catalog.create_table(
        f"{ns}.latest",
        pa.schema([pa.field("id", pa.int64(), False), ("data", pa.string())]),
        identifier_fields=["id"],
    )
    latest = write_input(tmp_path, FILES, seed=5)
    env = dict(os.environ)
    env["STREAM_SINK_KILL_CATALOG"] = json.dumps(
        {"type": "rest", **seaweed.rest_props("warehouse")}
    )
    env["STREAM_SINK_KILL_NAMESPACE"] = ns
    env["STREAM_SINK_KILL_CHECKPOINTS"] = f"s3://ckpt/kill-{ns}"
    job = kill_job(tmp_path, env=env)
    job.killed_at("after-staged-write@2")
    job.killed_mid_stream(kill_rng(5))
    job.run_to_end()

    events = rest_catalog.load_table(f"{ns}.events")
    upsert = rest_catalog.load_table(f"{ns}.latest")
    ids = sorted(events.scan().to_arrow()["id"].to_pylist())
    assert ids == list(range(FILES * APPEND_ROWS))
    got = upsert.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["data"]) for r in got) == sorted(latest.items())
    assert [r[0] for r in duckdb_rest_rows(seaweed, f"{ns}.events", "id")] == ids
    duck = duckdb_rest_rows(seaweed, f"{ns}.latest", "id, data")
    assert sorted(duck) == sorted(latest.items())
    for table in (events, upsert):
        assert_committed_once(iceberg_marks(table))
