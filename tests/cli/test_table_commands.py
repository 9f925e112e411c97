"""`stream-sink table …` and `stream-sink read`: what a user sees in a terminal.

Tests stream_sink.cli.table_paths: Iceberg tables given by a directory or a metadata file."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stream_sink as ss
from stream_sink.cli.main import main


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    wh = str(tmp_path / "wh")
    catalog = ss.load_catalog("local", type="hadoop", warehouse=wh)
    catalog.create_namespace("db")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("cat", pa.string())])
    t = catalog.create_table("db.events", schema, partition_spec=[("day", "ts")])
    rows = {
        "id": list(range(30)),
        "ts": [dt.datetime(2024, 1, 1 + i % 3) for i in range(30)],
        "cat": ["a", "b", "c"] * 10,
    }
    t.append(pa.table(rows))
    t.append(pa.table({"id": [100], "ts": [dt.datetime(2024, 1, 1)], "cat": ["z"]}))
    return wh


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_show_snapshots_files(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "table", "list", "--warehouse", warehouse)
    assert code == 0 and "db.events" in out
    code, out, _ = run(capsys, "table", "show", "db.events", "--warehouse", warehouse)
    assert "day(ts) as ts_day" in out and "1: id: optional long" in out
    code, out, _ = run(capsys, "table", "snapshots", "db.events", "--warehouse", warehouse)
    lines = out.strip().splitlines()
    assert len(lines) == 4  # header, rule, two snapshots
    assert "append" in lines[2] and "30" in lines[2]
    code, out, _ = run(
        capsys, "table", "files", "db.events", "--warehouse", warehouse, "--format", "jsonl"
    )
    files = [json.loads(line) for line in out.splitlines()]
    assert sum(f["records"] for f in files) == 31
    assert {f["partition"] for f in files} == {
        "ts_day=2024-01-01",
        "ts_day=2024-01-02",
        "ts_day=2024-01-03",
    }


def test_read_prints_rows_and_honours_filter_limit_and_formats(
    warehouse: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        capsys,
        "read",
        "db.events",
        "--warehouse",
        warehouse,
        "--filter",
        "id >= 25",
        "--limit",
        "2",
    )
    assert code == 0
    assert "(2 of 6 rows shown; --limit 0 shows all)" in out
    code, out, _ = run(
        capsys,
        "read",
        "db.events",
        "--warehouse",
        warehouse,
        "--format",
        "jsonl",
        "--limit",
        "0",
        "--columns",
        "id",
    )
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == [*range(30), 100]
    target = tmp_path / "out.parquet"
    run(
        capsys,
        "read",
        "db.events",
        "--warehouse",
        warehouse,
        "--format",
        "parquet",
        "--output",
        str(target),
    )
    assert pq.read_table(target).num_rows == 31


def test_errors_name_what_is_wrong(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "read", "db.nope", "--warehouse", warehouse)
    assert code == 1 and "db.nope" in err
    code, _, err = run(capsys, "read", "db.events", "--warehouse", warehouse, "--snapshot-id", "42")
    assert code == 1 and "42" in err
    code, _, err = run(
        capsys, "read", "db.events", "--warehouse", warehouse, "--filter", "nope = 1"
    )
    assert code == 1 and "nope" in err


def test_snapshots_show_live_rows_and_watermark_column(
    warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "table", "snapshots", "db.events", "--warehouse", warehouse, "--format", "jsonl"
    )
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["live_rows"] for r in rows] == [30, 31]
    assert all("watermark" in r and "checkpoint" not in r for r in rows)
    code, out, _ = run(capsys, "table", "show", "db.events", "--warehouse", warehouse)
    assert "sinks (watermark" in out and "(none: no snapshot written by a sink)" in out


def test_a_missing_warehouse_is_an_error_naming_it_and_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "warehuose"
    for args in (["table", "list"], ["table", "show", "db.events"], ["read", "db.events"]):
        code, _, err = run(capsys, *args, "--warehouse", str(missing))
        assert code == 1 and str(missing) in err and "does not exist" in err, (args, err)
    code, _, err = run(
        capsys, "table", "list", "--catalog-uri", f"sqlite:///{tmp_path / 'nope.db'}"
    )
    assert code == 1 and "nope.db" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_read_only_commands_take_an_iceberg_tables_directory(
    warehouse: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(warehouse).parent)
    by_name = {
        cmd: run(capsys, "table", cmd, "db.events", "--warehouse", "wh", "--format", "jsonl")
        for cmd in ("show", "snapshots", "files")
    }
    for cmd, (code, out, _) in by_name.items():
        for directory in ("wh/db/events", "wh/db/events/", f"{warehouse}/db/events"):
            assert run(capsys, "table", cmd, directory, "--format", "jsonl") == (code, out, "")
    code, out, _ = run(capsys, "read", "wh/db/events", "--filter", "id = 100", "--format", "jsonl")
    assert code == 0 and [json.loads(line)["cat"] for line in out.splitlines()] == ["z"]


def test_a_directory_without_a_table_and_a_table_given_as_warehouse_are_named(
    warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "table", "show", f"{warehouse}/db/nothing")
    assert code == 1 and out == ""
    assert f"no table at {warehouse}/db/nothing" in err and "metadata/" in err
    code, out, err = run(capsys, "table", "list", "--warehouse", f"{warehouse}/db/events")
    assert code == 1 and out == ""
    assert "is a table's directory" in err and f"table show {warehouse}/db/events" in err
    assert f"the warehouse holding it is {warehouse}" in err


def test_read_and_show_take_a_metadata_file_and_a_directory_of_such_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = ss.load_catalog(
        "sql", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh")
    )
    catalog.create_namespace("db")
    t = catalog.create_table("db.events", pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2]}))
    t.append(pa.table({"id": [3]}))
    files = sorted((Path(t.location) / "metadata").glob("0000*.metadata.json"))
    assert len(files) == 3 and not (Path(t.location) / "metadata" / "version-hint.text").exists()
    code, out, err = run(capsys, "read", t.location, "--format", "jsonl")
    assert (code, err) == (0, "") and sorted(json.loads(x)["id"] for x in out.splitlines()) == [
        1,
        2,
        3,
    ]
    code, out, _ = run(capsys, "read", str(files[1]), "--format", "jsonl")
    assert code == 0 and sorted(json.loads(x)["id"] for x in out.splitlines()) == [1, 2]
    code, out, _ = run(capsys, "table", "show", str(files[1]), "--format", "jsonl")
    info = json.loads(out)
    assert info["metadata"] == str(files[1]) and info["table"] == "db.events"
    assert info["current_snapshot_id"] == t.refresh().snapshots()[0].snapshot_id
    code, out, _ = run(capsys, "table", "snapshots", t.location, "--format", "jsonl")
    assert code == 0 and len(out.splitlines()) == 2


def test_show_masks_secret_properties(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A table property holding a credential (an engine's storage key, a SAS token)
    is shown as ``****``, in both formats; the others as they are."""
    wh = str(tmp_path / "wh")
    catalog = ss.load_catalog("local", type="hadoop", warehouse=wh)
    catalog.create_namespace("db")
    props = {
        "adls.sas-token.acct": "sv=2024&sig=c2FzLXNpZw",
        "s3.secret-access-key": "s3-secret-1",
        "write.format.default": "parquet",
    }
    catalog.create_table("db.t", pa.schema([("id", pa.int64())]), properties=props)
    code, out, _ = run(capsys, "table", "show", "db.t", "--warehouse", wh, "--format", "jsonl")
    shown = json.loads(out)["properties"]
    assert code == 0 and shown["adls.sas-token.acct"] == shown["s3.secret-access-key"] == "****"
    assert shown["write.format.default"] == "parquet"
    code, out, _ = run(capsys, "table", "show", "db.t", "--warehouse", wh)
    assert "c2FzLXNpZw" not in out and "s3-secret-1" not in out and "parquet" in out
