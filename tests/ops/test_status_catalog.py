"""What a sink records of its catalog for ``stream-sink status``: enough to open it again,
never a credential.

Tests stream_sink.cli.status: ``stream-sink status`` from a sink's checkpoints."""

from __future__ import annotations

import json
import re
import socket
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.checkpoints import TableIdentity
from stream_sink.cli.main import main
from stream_sink.commit.iceberg.target import IcebergTarget
from stream_sink.delta import DeltaTable
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.writer import write_data_files
from stream_sink.exceptions import NotFoundError
from stream_sink.ops.status import describe_catalog, open_recorded_catalog
from stream_sink.spark.runtime import DeltaPlaces, open_delta


@pytest.mark.postgres
@pytest.mark.parametrize("spelling", ["user info", "query string", "jdbc"])
def test_a_sql_catalog_is_recorded_without_its_password_and_opens_again(
    postgres_url: str, tmp_path: Path, spelling: str
) -> None:
    """``postgresql://u:pw@db``, ``postgresql://u@db?password=pw`` and
    ``jdbc:postgresql://db?user=u&password=pw``: the password is in no record, repr
    or description, and the record opens the catalog again."""
    host = postgres_url.split("://postgres@", 1)[1]
    uri, recorded_uri = {
        "user info": (f"postgresql://postgres:hunter2@{host}", postgres_url),
        "query string": (f"{postgres_url}?password=hunter2", postgres_url),
        "jdbc": (
            f"jdbc:postgresql://{host}?user=postgres&password=hunter2",
            f"jdbc:postgresql://{host}?user=postgres",
        ),
    }[spelling]
    name = f"c{uuid.uuid4().hex[:8]}"
    catalog = ss.load_catalog(
        name,
        type="sql",
        uri=uri,
        warehouse=str(tmp_path / "wh"),
        **{
            "s3.endpoint": "http://127.0.0.1:9",
            "s3.secret-access-key": "s3cr3t",
            "jdbc.password": "pw2",
        },
    )
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    identity = IcebergTarget(table).identity()
    recorded = identity.to_json()
    shown = repr(catalog) + describe_catalog(catalog)
    for secret in ("hunter2", "s3cr3t", "pw2"):
        assert secret not in recorded and secret not in shown
    assert json.loads(recorded)["catalog-settings"] == {
        "type": "sql",
        "uri": recorded_uri,
        "warehouse": str(tmp_path / "wh"),
        "s3.endpoint": "http://127.0.0.1:9",
    }
    reopened = open_recorded_catalog(identity)
    assert reopened.load_table("db.t").metadata.table_uuid == table.metadata.table_uuid


def test_a_hadoop_warehouse_that_is_gone_is_not_created_again(tmp_path: Path) -> None:
    catalog = ss.load_catalog("demo", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    identity = IcebergTarget(
        catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    ).identity()
    (tmp_path / "wh").rename(tmp_path / "moved")
    with pytest.raises(NotFoundError, match="does not exist any more; pass --warehouse"):
        open_recorded_catalog(identity)
    assert not (tmp_path / "wh").exists()


def test_status_says_when_the_recorded_catalog_is_down_and_reports_nothing_uncommitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint location as Spark and the sink leave it (three acknowledged batches),
    whose sink recorded a PostgreSQL catalog that no longer answers."""
    chk = tmp_path / "chk"
    (chk / "spark" / "commits").mkdir(parents=True)
    (chk / "spark" / "metadata").write_text(json.dumps({"id": "q-1"}))
    for batch in range(3):
        (chk / "spark" / "commits" / str(batch)).write_text("v1\n{}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"postgresql://postgres@127.0.0.1:{s.getsockname()[1]}/postgres"
    settings = {"type": "sql", "uri": down}
    (chk / "orders").mkdir()
    (chk / "orders" / "_table.json").write_text(
        TableIdentity("prod", "db.orders", "u-1", settings).to_json()
    )
    code = main(["status", "--checkpoint-location", str(chk), "--format", "jsonl"])
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert code == 1 and doc["table"] == "db.orders" and doc["acknowledged"] == [0, 1, 2]
    assert doc["watermark"] is None and doc["staged"] is None and doc["pending"] is None
    reason = doc["table_error"]
    assert f"cannot open catalog 'prod' as the sink recorded it (type=sql, uri={down})" in reason
    assert "pass --catalog-uri" in reason and "cannot read table db.orders" in out.err


def test_status_of_a_data_source_query_reads_spark_and_maintenance_at_its_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``format("stream_sink")`` checkpoints under Spark's own ``checkpointLocation``
    (Spark's ``metadata``, ``offsets/``, ``commits/`` beside ``<sink id>/``): status
    finds the query and the sink there, with what the route's maintenance reported."""
    from stream_sink.io import FileIO
    from stream_sink.maintenance import MaintenanceOptions
    from stream_sink.maintenance.per_commit import maintain_after_commit

    wh, chk = str(tmp_path / "wh"), tmp_path / "chk"
    catalog = ss.load_catalog("demo", type="hadoop", warehouse=wh)
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    for batch in range(2):
        table.append(pa.table({"id": [batch]}))
    data_source_checkpoint(chk)
    report = str(chk / "db.t" / "maintenance.json")
    maintain_after_commit(
        lambda: catalog.load_table("db.t"),
        table.refresh().metadata,
        MaintenanceOptions(commit_count=2),
        owner="sink:db.t",
        io=FileIO.for_location(report),
        report=report,
        lock_location=None,
    )
    assert (
        main(["status", "--checkpoint-location", str(chk), "--warehouse", wh, "--format", "jsonl"])
        == 0
    )
    status = json.loads(capsys.readouterr().out)
    assert status["sink_id"] == "db.t" and status["acknowledged"] == [0, 1]
    assert status["maintenance"]["runs"] == 1 and status["maintenance"]["failures"] == 0
    assert main(["status", "--checkpoint-location", str(chk), "--warehouse", wh]) == 0
    assert "1 runs, 0 failed, 0 yielded" in capsys.readouterr().out


def data_source_checkpoint(chk: Path) -> None:
    """Spark's files of a ``format("stream_sink")`` query at its ``checkpointLocation``:
    batches 0 and 1 planned and acknowledged."""
    for folder in ("offsets", "commits", "sources/0"):
        (chk / folder).mkdir(parents=True)
    (chk / "metadata").write_text('{"id":"7d4f0c6e-1111-2222-3333-444455556666"}\n')
    for batch in ("0", "1"):
        (chk / "offsets" / batch).write_text('v1\n{"batchWatermarkMs":0}\n{}')
        (chk / "commits" / batch).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_status_of_a_delta_data_source_query_shows_its_compacted_and_vacuumed_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Delta route (and ``DeltaSink``) keep their own counts in ``maintenance.json``:
    status shows files compacted and vacuumed, and no Iceberg counts it never had."""
    from stream_sink.delta.maintenance import DeltaMaintenanceMetrics, write_report
    from stream_sink.io import FileIO

    chk = tmp_path / "chk"
    data_source_checkpoint(chk)
    (chk / "touched-keys").mkdir()  # the Delta route's spilled keys, not a sink
    report = str(chk / "pages" / "maintenance.json")
    metrics = DeltaMaintenanceMetrics(
        runs=3,
        failures=1,
        compacted_files=12,
        vacuumed_files=7,
        backlog_runs=1,
        last_error="vacuum: OSError: disk full",
        backlog=True,
    )
    write_report(FileIO.for_location(report), report, metrics)
    (tmp_path / "wh").mkdir()
    args = ["status", "--checkpoint-location", str(chk), "--warehouse", str(tmp_path / "wh")]

    # exit 1: the sink recorded no table (an older version): "table unknown"
    assert main([*args, "--format", "jsonl"]) == 1
    status = json.loads(capsys.readouterr().out)
    assert status["sink_id"] == "pages" and status["acknowledged"] == [0, 1]
    assert status["maintenance"] == {
        "runs": 3,
        "failures": 1,
        "compacted_files": 12,
        "vacuumed_files": 7,
        "backlog_runs": 1,
        "last_error": "vacuum: OSError: disk full",
        "backlog": True,
    }
    main(args)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("maintenance"))
    assert line.split(None, 1)[1] == (
        "3 runs, 1 failed; 12 files compacted, 7 vacuumed; 1 left work behind; "
        "last error: vacuum: OSError: disk full"
    )


def delta_sink_run(
    tmp_path: Path, location: str | None = None, storage: dict[str, str] | None = None
) -> tuple[Path, DeltaTable]:
    """A Delta sink of the ``format("stream_sink")`` route (its checkpoint location is
    Spark's) that committed two batches of two rows each into ``location`` (default:
    ``lake/pages``; on a store with ``storage``)."""
    chk = tmp_path / "chk"
    data_source_checkpoint(chk)
    acknowledged = sorted((chk / "commits").iterdir())
    for f in acknowledged:  # Spark acknowledges each batch once the sink has it
        f.rename(f.with_suffix(".later"))
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    location = location or str(tmp_path / "lake" / "pages")
    table = DeltaTable.create(location, schema, storage_options=storage)
    places = DeltaPlaces.resolve(
        table.location,
        sink_id="pages",
        checkpoint_location=str(chk),
        spark_checkpoint_location=str(chk),
        state_dir=str(tmp_path / "state"),
        storage_options=storage,
    )
    runtime = open_delta(places, table, "append", places.job_id())
    try:
        for batch in range(2):
            rows = pa.table({"id": [2 * batch, 2 * batch + 1], "v": ["a", "b"]})
            adds = write_data_files(table.location, rows, schema, (), io=table.io)
            runtime.record(batch, DeltaBatch(tuple(adds)))
            acknowledged[batch].with_suffix(".later").rename(acknowledged[batch])
    finally:
        runtime.close()
    return chk, table.refresh()


def test_status_of_a_delta_sink_shows_its_table_version_files_and_watermark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given only the checkpoint location (from another directory too), status finds the
    Delta table the sink recorded: its version, live files and the sink's last commit."""
    chk, table = delta_sink_run(tmp_path)
    rows = DeltaTable.load(table.location).to_arrow()
    assert sorted(rows.column("id").to_pylist()) == [0, 1, 2, 3]
    monkeypatch.chdir(tmp_path / "lake")
    args = ["status", "--checkpoint-location", str(chk)]
    assert main([*args, "--format", "jsonl"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["sink_id"] == "pages" and status["table"] == table.location
    assert status["watermark"] == 1 and status["table_error"] is None
    assert status["staged"] == [] and status["pending"] == []
    assert status["last_commit"]["snapshot_id"] == table.version == 2
    assert status["last_commit"]["watermark"] == 1
    assert status["delta"]["version"] == 2 and status["delta"]["files"] == 2
    assert main(args) == 0
    text = capsys.readouterr().out
    assert f"table                       {table.location}\n" in text
    assert "catalog                     none (a Delta table, by its location)" in text
    assert "delta table                 version 2, 2 live files (" in text
    assert "watermark                   1 (the highest Spark batch id" in text
    assert "last commit                 version 2 at " in text and text.count(", watermark 1")


def test_status_of_a_delta_sink_that_recorded_no_table_says_table_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint location of an older version (no table recorded): status says the
    table is unknown and what to pass, exits 1; with ``--table PATH`` it reads it."""
    chk, table = delta_sink_run(tmp_path)
    (chk / "pages" / "_table.json").unlink()
    for meta in (chk / "pages").glob("chk-*/_metadata"):
        doc = json.loads(meta.read_text())
        del doc["table"]
        meta.write_text(json.dumps(doc))
    (tmp_path / "wh").mkdir()
    args = ["status", "--checkpoint-location", str(chk), "--format", "jsonl"]
    assert main([*args, "--warehouse", str(tmp_path / "wh")]) == 1
    out = capsys.readouterr()
    status = json.loads(out.out)
    assert status["watermark"] is None and status["staged"] is None
    assert "table unknown" in status["table_error"] and "--table" in status["table_error"]
    assert "cannot read table" in out.err
    assert main([*args, "--table", table.location]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["watermark"] == 1 and status["delta"]["files"] == 2


def test_status_of_a_delta_sink_on_s3_records_no_credential_and_reads_with_given_ones(
    tmp_path: Path, s3_props: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The sink records the table's location and the store's endpoint, never its keys;
    status reads the table with keys given as ``--catalog-property``."""
    location = f"s3://lake/delta/{uuid.uuid4().hex}"
    chk, _ = delta_sink_run(tmp_path, location, s3_props)
    recorded = (chk / "pages" / "_table.json").read_text()
    assert location in recorded and s3_props["s3.endpoint"] in recorded
    assert s3_props["s3.secret-access-key"] not in recorded and "access-key" not in recorded
    keys = ("s3.access-key-id", "s3.secret-access-key")
    args = ["status", "--checkpoint-location", str(chk), "--format", "jsonl"]
    for key in keys:
        args += ["--catalog-property", f"{key}={s3_props[key]}"]
    assert main(args) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["table"] == location and status["watermark"] == 1
    assert status["delta"]["files"] == 2


def test_status_shows_what_a_sink_holding_transactions_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A routed table's status reads its sink's hold report (``<sink id>/transactions.json``)."""
    from stream_sink.io import FileIO
    from stream_sink.metrics.transactions import (
        TransactionMetricsSnapshot,
        hold_report_location,
        write_hold_report,
    )

    wh, chk = str(tmp_path / "wh"), tmp_path / "chk"
    catalog = ss.load_catalog("demo", type="hadoop", warehouse=wh)
    catalog.create_namespace("db")
    catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    data_source_checkpoint(chk)
    (chk / "routed=db.t").mkdir()
    held = TransactionMetricsSnapshot(2, 7, 1, 3, 40)
    write_hold_report(FileIO.for_location(str(chk)), hold_report_location(str(chk), "routed"), held)
    args = ["status", "--checkpoint-location", str(chk), "--warehouse", wh]
    args += ["--sink-id", "routed=db.t", "--table", "db.t"]
    assert main(args) == 0
    out = capsys.readouterr().out
    line = "2 (7 rows) since batch 1; committed 40 complete, 3 forced out by the bound"
    assert re.search(rf"held transactions +{re.escape(line)}", out), out
    assert main([*args, "--format", "jsonl"]) == 0
    assert json.loads(capsys.readouterr().out)["transactions"]["held_rows"] == 7
