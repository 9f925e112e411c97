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


ROUTED_SCHEMA = "_table string, op string, id long, v string, seq long"


def test_routed_upsert_stream_of_two_tables_into_rest_tables(
    spark: Any, tmp_path: Path, seaweed: Any, rest_catalog: Any
) -> None:
    """One query upserting two tables of SeaweedFS's REST catalog (``table_column=``): the
    staging manifests of each ``<sink id>=<table>`` operator get names the table bucket
    takes (it refuses ``=`` in a metadata file's name). After a restart from the
    checkpoints on ``s3://`` (local state lost) each table holds its changes once, read
    by ours, by DuckDB attaching the catalog, and by pyiceberg through it once the
    equality deletes are converted (it applies none)."""
    ns = rest_catalog.test_namespace
    names = (f"{ns}.customers", f"{ns}.orders")
    rest_catalog.create_table(names[0], SCHEMA, identifier_fields=["id"])
    rest_catalog.create_table(
        names[1], SCHEMA, identifier_fields=["id"], partition_spec=[("bucket", "id", 4)]
    )
    files = [
        [
            {"_table": n, "op": "+I", "id": i, "v": f"{n[-1]}{i}", "seq": i}
            for n in names
            for i in range(5)
        ],
        [
            {"_table": names[0], "op": "+U", "id": 1, "v": "s1", "seq": 10},
            {"_table": names[0], "op": "-D", "id": 2, "v": None, "seq": 11},
            {"_table": names[1], "op": "+U", "id": 3, "v": "s3", "seq": 12},
            {"_table": names[1], "op": "+I", "id": 7, "v": "s7", "seq": 13},
        ],
        [
            {"_table": names[1], "op": "-D", "id": 0, "v": None, "seq": 20},
            {"_table": names[0], "op": "+I", "id": 2, "v": "t2", "seq": 21},
            {"_table": names[0], "op": "+U", "id": 2, "v": "u2", "seq": 22},
        ],
    ]
    want: dict[str, dict[int, str]] = {n: {} for n in names}
    for batch in files:
        for r in batch:
            if r["op"] == "-D":
                want[r["_table"]].pop(r["id"], None)
            else:
                want[r["_table"]][r["id"]] = r["v"]
    source = tmp_path / "in"
    write_batches(source, files[:2])

    def run() -> None:
        sink = IcebergSink(
            catalog=rest_catalog,
            table_column="_table",
            namespaces=[ns],
            mode="upsert",
            row_kind_column="op",
            equality_fields=["id"],
            order_by="seq",
            checkpoint_location=f"s3://ckpt/routed-{ns}",
            spark_checkpoint_location=str(tmp_path / "spark-chk"),
            state_dir=str(tmp_path / "state"),
        )
        try:
            run_available(
                spark, source, ROUTED_SCHEMA, sink.foreach_batch, sink.spark_checkpoint_location
            )
        finally:
            sink.close()

    run()
    shutil.rmtree(tmp_path / "state")  # restored from the checkpoints on s3://
    write_batches(source, files[2:], first=2)
    run()

    for name in names:
        table = rest_catalog.load_table(name)
        assert {s.summary["stream-sink.operator-id"] for s in table.snapshots()} == {
            f"routed-_table={name}"
        }
        assert len(table.snapshots()) == len(
            [b for b in files if any(r["_table"] == name for r in b)]
        )
        rows = table.scan().to_arrow().to_pylist()
        expected = sorted(want[name].items())
        assert sorted((r["id"], r["v"]) for r in rows) == expected, name
        assert duckdb_rest_rows(seaweed, name) == expected, name
        table.maintenance.convert_equality_deletes()
        assert pyiceberg_rest_rows(seaweed, name) == expected, name
        store = FileIO.for_location(table.location, seaweed.s3_props)
        left = [f.relative for f in store.walk(f"{table.location}/metadata")]
        assert not [f for f in left if "=" in f], left


def pyiceberg_rest_rows(seaweed: Any, table: str) -> list[tuple[Any, ...]]:
    """(id, v) of ``table`` as pyiceberg's REST catalog on SeaweedFS's reads them, sorted."""
    from pyiceberg.catalog import load_catalog as py_load_catalog

    props = dict(seaweed.rest_props("warehouse"))
    props["client.access-key-id"] = seaweed.access_key
    props["client.secret-access-key"] = seaweed.secret_key
    rows = py_load_catalog("py", **props).load_table(tuple(table.split("."))).scan().to_arrow()
    return sorted(zip(rows["id"].to_pylist(), rows["v"].to_pylist(), strict=True))
