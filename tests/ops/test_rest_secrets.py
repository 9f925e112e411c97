"""A sink on a REST catalog whose properties hold secret headers and keys (Apache
Iceberg's own REST server, tables on the local filesystem; the commit driver as a
front door drives it, no Spark): the catalog is recorded as the REST catalog it is,
``stream-sink status`` and ``table show`` work and print no secret, and no secret is
in the checkpoint, the state, the logs or what executors are handed."""

from __future__ import annotations

import json
import logging
import pickle
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from stream_sink.catalogs import load_catalog
from stream_sink.cli.main import main
from stream_sink.spark.options import parse_options
from stream_sink.spark.runtime import open_iceberg
from stream_sink.write.writer_factory import TaskWriterFactory

pytestmark = pytest.mark.slow

SECRETS = {
    "header.Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LWp3dA",
    "header.X-Api-Key": "api-key-7f3a9c51",
    "adls.auth.shared-key.account.key": "YWNjb3VudC1rZXktOTkx",
    "adls.sas-token.lakeacct": "sv=2024-01-01&sig=c2FzLXNpZy05MQ",
}
TABLE_SECRET = "table-held-sas-4e1d"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def sink_run(catalog: Any, name: str, tmp_path: Path) -> Path:
    """Two batches through the sink's commit driver, each acknowledged in Spark's
    commit log once recorded (as Spark does when ``foreachBatch`` returns); the sink's
    checkpoint location."""
    chk = tmp_path / "chk"
    spark = chk / "spark"
    for folder in ("offsets", "commits"):
        (spark / folder).mkdir(parents=True)
    (spark / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}))
    options = parse_options(
        table=name, checkpoint_location=str(chk), state_dir=str(tmp_path / "state")
    )
    table = catalog.load_table(name)
    runtime = open_iceberg(catalog, options, table)
    try:
        for batch in range(2):
            (spark / "offsets" / str(batch)).write_text('v1\n{"batchWatermarkMs":0}\n{}')
            writer = TaskWriterFactory.for_table(table).create(0, batch)
            writer.write(pa.table({"id": [batch], "v": [f"r{batch}"]}, schema=SCHEMA))
            runtime.record(batch, writer.complete())
            (spark / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    finally:
        runtime.close()
    return chk


def test_a_rest_sink_records_prints_logs_and_ships_no_secret(
    iceberg_rest: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    catalog = load_catalog("lake", type="rest", uri=iceberg_rest.uri, **SECRETS)
    ns = f"ns{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(ns)
    name = f"{ns}.orders"
    catalog.create_table(name, SCHEMA, properties={"adls.sas-token.other": TABLE_SECRET})
    chk = sink_run(catalog, name, tmp_path)

    recorded = json.loads((chk / name / "_table.json").read_text())["catalog-settings"]
    assert recorded["type"] == "rest" and recorded["uri"] == iceberg_rest.uri

    # status on the sink's own record: it opens the REST catalog, no option needed
    assert main(["status", "--checkpoint-location", str(chk), "--format", "jsonl"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["watermark"] == 1 and status["table_error"] is None
    assert status["catalog"] == f"lake ({iceberg_rest.uri})"
    assert main(["status", "--checkpoint-location", str(chk)]) == 0
    printed = capsys.readouterr().out
    assert "watermark                   1 (" in printed

    # table show, the secrets given in a properties file (not in argv)
    props = tmp_path / "catalog.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in SECRETS.items()))
    cli = ["--catalog-type", "rest", "--catalog-uri", iceberg_rest.uri]
    assert main(["table", "show", name, *cli, "--catalog-properties-file", str(props)]) == 0
    shown = capsys.readouterr().out
    assert "'adls.sas-token.other': '****'" in shown
    printed += shown

    # executors: the writer factory and the credential renewal they would be handed
    table = catalog.load_table(name)
    shipped = pickle.dumps(TaskWriterFactory.for_table(table))
    ident = tuple(name.split("."))
    renewal = catalog._executor_renewal(ident, table.location)
    assert renewal is None  # the catalog needs secret headers: executors renew nothing
    shipped += pickle.dumps(renewal)

    values = [*SECRETS.values(), TABLE_SECRET]
    secrets = {v for v in values} | {v.split(" ", 1)[-1] for v in values}
    leaks = [f"printed: {s}" for s in secrets if s in printed]
    leaks += [
        f"log: {r.getMessage()[:80]}" for r in caplog.records if _has(r.getMessage(), secrets)
    ]
    leaks += [f"pickled: {s}" for s in secrets if s.encode() in shipped]
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != props and _has(path.read_bytes(), secrets):
            leaks.append(str(path.relative_to(tmp_path)))
    assert not leaks, f"secrets found in: {leaks}"


def _has(text: str | bytes, secrets: set[str]) -> bool:
    if isinstance(text, bytes):
        return any(s.encode() in text for s in secrets)
    return any(s in text for s in secrets)


def test_a_catalog_with_only_public_headers_renews_on_executors(iceberg_rest: Any) -> None:
    """Without a secret header the executors' renewal request is built, carrying the
    public headers and no secret; it sends them to the catalog's own origin only."""
    catalog = load_catalog(
        "lake",
        type="rest",
        uri=iceberg_rest.uri,
        **{"header.X-Iceberg-Access-Delegation": "vended-credentials"},
    )
    ns = f"ns{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.t", SCHEMA)
    renewal = catalog._executor_renewal((ns, "t"), table.location)
    assert renewal is not None and renewal.origin == iceberg_rest.uri
    assert dict(renewal.headers) == {"X-Iceberg-Access-Delegation": "vended-credentials"}
