"""The kill test on a REST catalog: the append and upsert streams of ``kill_job.py`` into
tables behind a REST catalog (SeaweedFS's, tables on its S3; and Apache Iceberg's own
REST server), the sink's checkpoints on ``s3://`` and Spark's own ``checkpointLocation``
on ``s3a://`` (hadoop-aws, ``local_session(s3a=...)``), both on SeaweedFS; killed inside
the commit protocol and at a random moment, then run to the end. Every appended row
exactly once and every key's last value, read by our reader, by Apache Iceberg Java and
pyiceberg through the same REST catalog, and by DuckDB attaching SeaweedFS's catalog."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kill_harness import assert_committed_once, iceberg_marks, kill_rng
from test_iceberg_rest_catalog import duckdb_rest_rows
from test_kill import APPEND_ROWS, kill_job, prepare

from stream_sink.catalogs import load_catalog

FILES = 5
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.spread]


@dataclass
class KillCatalog:
    """A REST catalog for the kill job: its ``load_catalog`` arguments, the same catalog
    as Apache Iceberg Java's catalog properties, and an open handle with a namespace."""

    kind: str
    props: dict[str, Any]
    java: dict[str, str]
    catalog: Any
    namespace: str


@pytest.fixture(params=["seaweedfs", "iceberg-rest"])
def kill_catalog(request: pytest.FixtureRequest, seaweed: Any) -> KillCatalog:
    s3 = seaweed.s3_props
    java_s3 = {
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": s3["s3.endpoint"],
        "s3.path-style-access": "true",
        "s3.access-key-id": s3["s3.access-key-id"],
        "s3.secret-access-key": s3["s3.secret-access-key"],
        "client.region": s3["s3.region"],
    }
    if request.param == "seaweedfs":
        cat = request.getfixturevalue("rest_catalog")
        props = {"type": "rest", **seaweed.rest_props("warehouse")}
        java = {
            "type": "rest",
            "uri": seaweed.catalog_uri,
            "warehouse": "s3://warehouse",
            # OAuth2 client credentials: SeaweedFS trades its S3 key for a token
            "credential": f"{seaweed.access_key}:{seaweed.secret_key}",
            "oauth2-server-uri": f"{seaweed.catalog_uri}/v1/oauth/tokens",
            **java_s3,
        }
        return KillCatalog("seaweedfs", props, java, cat, cat.test_namespace)
    server = request.getfixturevalue("iceberg_rest")  # tables on its local warehouse
    props = {"type": "rest", "uri": server.uri, **s3}  # s3.*: the sink's checkpoints
    cat = load_catalog("ref", **props)
    ns = f"kill{uuid.uuid4().hex[:8]}"
    cat.create_namespace(ns)
    return KillCatalog("iceberg-rest", props, {"type": "rest", "uri": server.uri}, cat, ns)


@pytest.mark.timeout(1800)
def test_sigkill_and_restart_exactly_once_on_a_rest_catalog(
    tmp_path: Path, seaweed: Any, kill_catalog: KillCatalog
) -> None:
    ns, catalog = kill_catalog.namespace, kill_catalog.catalog
    latest = prepare(tmp_path, FILES, catalog, ns)
    env = dict(os.environ)
    env["STREAM_SINK_KILL_CATALOG"] = json.dumps(kill_catalog.props)
    env["STREAM_SINK_KILL_NAMESPACE"] = ns
    env["STREAM_SINK_KILL_CHECKPOINTS"] = f"s3://ckpt/kill-{ns}"
    env["STREAM_SINK_KILL_S3A"] = json.dumps(seaweed.s3_props)
    env["STREAM_SINK_KILL_SPARK_CHECKPOINTS"] = f"s3a://ckpt/kill-{ns}"

    job = kill_job(tmp_path, env=env)
    job.killed_at("after-staged-write@2")
    job.killed_mid_stream(kill_rng(5))
    job.run_to_end()

    store = seaweed_store(seaweed)
    assert store.exists(f"s3://ckpt/kill-{ns}/spark-append/offsets/0")  # Spark's, on s3a
    assert store.exists(f"s3://ckpt/kill-{ns}/spark-upsert/commits/0")

    events = catalog.load_table(f"{ns}.events")
    upsert = catalog.load_table(f"{ns}.latest")
    ids = sorted(events.scan().to_arrow()["id"].to_pylist())
    assert ids == list(range(FILES * APPEND_ROWS))
    got = upsert.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["data"]) for r in got) == sorted(latest.items())
    for table in (events, upsert):
        assert_committed_once(iceberg_marks(table))

    # pyiceberg's REST catalog (it reads no equality deletes: the append table, and the
    # upsert table's current snapshot)
    py = pyiceberg_catalog(kill_catalog, seaweed)
    assert sorted(py.load_table((ns, "events")).scan().to_arrow()["id"].to_pylist()) == ids
    py_latest = py.load_table((ns, "latest")).metadata.current_snapshot_id
    assert py_latest == upsert.metadata.current_snapshot_id

    from peers.readers import sql_with_java_catalog

    java_events, java_latest = sql_with_java_catalog(
        "rc",
        kill_catalog.java,
        [f"SELECT id FROM rc.{ns}.events", f"SELECT id, data FROM rc.{ns}.latest"],
    )
    assert java_events is not None and java_latest is not None
    assert sorted(java_events["id"].to_pylist()) == ids
    java_rows = zip(java_latest["id"].to_pylist(), java_latest["data"].to_pylist(), strict=True)
    assert sorted(java_rows) == sorted(latest.items())

    if kill_catalog.kind == "seaweedfs":  # DuckDB attaches SeaweedFS's catalog by token
        assert [r[0] for r in duckdb_rest_rows(seaweed, f"{ns}.events", "id")] == ids
        duck = duckdb_rest_rows(seaweed, f"{ns}.latest", "id, data")
        assert sorted(duck) == sorted(latest.items())


def seaweed_store(seaweed: Any) -> Any:
    from stream_sink.io import FileIO

    return FileIO.for_location("s3://ckpt", seaweed.s3_props)


def pyiceberg_catalog(kill_catalog: KillCatalog, seaweed: Any) -> Any:
    from pyiceberg.catalog import load_catalog as py_load_catalog

    props = {k: str(v) for k, v in kill_catalog.props.items()}
    if kill_catalog.kind == "seaweedfs":  # SigV4 for the catalog with the S3 key
        props["client.access-key-id"] = seaweed.access_key
        props["client.secret-access-key"] = seaweed.secret_key
    return py_load_catalog("py", **props)
