"""The sink on a table behind a REST catalog (SeaweedFS's, on its own S3 storage): an
upsert stream with the sink's checkpoints on ``s3://``, restarted after losing its local
state; read back by our reader and by DuckDB attaching the same REST catalog; in-sink
maintenance runs without a lock location set (the sink records one beside its
checkpoints); the command line on the same catalog; and no secret in anything the run
leaves behind."""

from __future__ import annotations

import io
import json
import logging
import shutil
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import _extension_file, duckdb_connection
from streams import run_available, write_batches

import stream_sink as ss
from stream_sink.cli.main import main
from stream_sink.io import FileIO
from stream_sink.maintenance import MaintenanceOptions
from stream_sink.maintenance.lease_lock import sink_lock_location
from stream_sink.maintenance.lock import LOCK_LOCATION
from stream_sink.metrics.maintenance_report import read_report, report_location
from stream_sink.spark import IcebergSink

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("seq", pa.int64())])


def duckdb_rest_rows(seaweed: Any, table: str, columns: str = "id, v") -> list[tuple[Any, ...]]:
    """Rows of ``table`` read by DuckDB attaching SeaweedFS's REST catalog (OAuth2 token)."""
    con = duckdb_connection()
    con.execute(f"LOAD '{_extension_file('duckdb_extension_httpfs')}'")
    endpoint = seaweed.s3_endpoint.removeprefix("http://")
    con.execute(
        f"CREATE SECRET s3 (TYPE s3, KEY_ID '{seaweed.access_key}', SECRET "
        f"'{seaweed.secret_key}', ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false, "
        "REGION 'us-east-1')"
    )
    con.execute(
        f"CREATE SECRET rest (TYPE iceberg, CLIENT_ID '{seaweed.access_key}', CLIENT_SECRET "
        f"'{seaweed.secret_key}', OAUTH2_SERVER_URI '{seaweed.catalog_uri}/v1/oauth/tokens')"
    )
    con.execute(
        f"ATTACH 's3://warehouse' AS lake (TYPE iceberg, ENDPOINT '{seaweed.catalog_uri}', "
        "SECRET rest)"
    )
    ns, name = table.split(".")
    return con.execute(f'SELECT {columns} FROM lake."{ns}".{name} ORDER BY id').fetchall()


def test_upsert_stream_into_a_rest_table_survives_restart_and_leaks_no_secret(
    spark: Any,
    tmp_path: Path,
    seaweed: Any,
    rest_catalog: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    # OAuth2 client credentials for the catalog (pyiceberg's property), S3 keys for storage
    props = {k: v for k, v in seaweed.rest_props("warehouse").items() if not k.startswith("rest.")}
    props["credential"] = f"{seaweed.access_key}:{seaweed.secret_key}"
    catalog = ss.load_catalog("lake", type="rest", **props)
    name = f"{rest_catalog.test_namespace}.orders"
    catalog.create_table(name, SCHEMA, identifier_fields=["id"])
    source = tmp_path / "in"
    write_batches(
        source,
        [
            [{"id": i, "v": f"a{i}", "seq": i} for i in range(6)],
            [{"id": 1, "v": "b1", "seq": 10}, {"id": 7, "v": "b7", "seq": 11}],
        ],
    )
    chk = f"s3://ckpt/{rest_catalog.test_namespace}"

    def run() -> None:
        sink = IcebergSink(
            catalog=catalog,
            table=name,
            mode="upsert",
            equality_fields=["id"],
            order_by="seq",
            checkpoint_location=chk,
            spark_checkpoint_location=str(tmp_path / "spark-chk"),
            state_dir=str(tmp_path / "state"),
            # in-sink maintenance with no lock location on the table: the sink records
            # one beside its checkpoints (only metadata-file removal: no snapshot added)
            maintenance=MaintenanceOptions(
                commit_count=1,
                background=False,
                rewrite_data_files=False,
                convert_equality_deletes=False,
                expire_snapshots=False,
            ),
        )
        try:
            schema = "id long, v string, seq long"
            run_available(spark, source, schema, sink.foreach_batch, sink.spark_checkpoint_location)
        finally:
            sink.close()

    run()
    shutil.rmtree(tmp_path / "state")  # restored from the checkpoint on s3://
    write_batches(source, [[{"id": 2, "v": "c2", "seq": 20}]], first=2)
    run()

    want = [(0, "a0"), (1, "b1"), (2, "c2"), (3, "a3"), (4, "a4"), (5, "a5"), (7, "b7")]
    table = catalog.load_table(name)
    assert len(table.snapshots()) == 3  # one per batch, none twice
    ours = table.scan().to_arrow()
    assert sorted(zip(ours["id"].to_pylist(), ours["v"].to_pylist(), strict=True)) == want
    assert duckdb_rest_rows(seaweed, name) == want
    assert table.properties[LOCK_LOCATION] == sink_lock_location(chk, name)
    report = read_report(catalog.io_for(chk), report_location(chk, name))
    assert report is not None and report.runs >= 1 and report.failures == 0, report

    cli = [
        "--catalog-type",
        "rest",
        "--catalog-uri",
        seaweed.catalog_uri,
        "--warehouse",
        "s3://warehouse",
        "--catalog-name",
        "lake",
    ]
    for key, value in props.items():
        if key not in ("uri", "warehouse"):
            cli += ["--catalog-property", f"{key}={value}"]
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["table", "show", name, *cli]) == 0
        assert main(["read", name, "--format", "jsonl", "--limit", "0", *cli]) == 0
    printed = out.getvalue()
    assert sorted(
        json.loads(line)["id"] for line in printed.splitlines() if line.startswith('{"id"')
    ) == [0, 1, 2, 3, 4, 5, 7]

    secret = seaweed.secret_key
    leaks = [f"stdout: {printed.count(secret)}"] if secret in printed else []
    leaks += [r.getMessage() for r in caplog.records if secret in r.getMessage()]
    for path in tmp_path.rglob("*"):
        if path.is_file() and secret.encode() in path.read_bytes():
            leaks.append(str(path))
    store = FileIO.for_location(chk, seaweed.s3_props)
    for bucket_root in (chk, table.location):
        for f in store.walk(bucket_root):
            location = f"{bucket_root}/{f.relative}"
            if secret.encode() in store.read_bytes(location):
                leaks.append(location)
    assert not leaks, f"the S3/OAuth secret appears in: {leaks}"
