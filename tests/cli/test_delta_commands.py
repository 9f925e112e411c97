"""`stream-sink table show|snapshots|files` and `stream-sink read` on a Delta table path.

Tests stream_sink.cli.delta_commands: the table and read commands on a Delta table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from stream_sink.cli.main import main
from stream_sink.delta import DeltaTable, Txn


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def test_table_commands_and_read_accept_a_delta_table_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loc = str(tmp_path / "orders")
    table = DeltaTable.create(
        loc, pa.schema([("id", pa.int64()), ("p", pa.string())]), partition_by=["p"]
    )
    table.append(pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]}))
    txn = table.new_transaction().add(Txn("stream-sink:q:orders", 7))
    txn.commit()

    code, out = run(capsys, "table", "show", loc)
    assert code == 0 and "version: 2" in out and "partition_columns: ['p']" in out
    assert "sinks (watermark: the highest Spark batch id each sink committed):" in out
    (row,) = [line.split() for line in out.splitlines() if "stream-sink:q:orders" in line]
    assert row[:3] == ["orders", "q", "7"]
    code, out = run(capsys, "table", "snapshots", loc, "--format", "jsonl")
    versions = [json.loads(line) for line in out.splitlines()]
    assert [v["version"] for v in versions] == [0, 1, 2]
    assert versions[1]["added_files"] == 2 and versions[2]["txn"] == "stream-sink:q:orders=7"
    code, out = run(capsys, "table", "files", loc, "--format", "jsonl")
    assert sorted(json.loads(line)["records"] for line in out.splitlines()) == [1, 2]
    code, out = run(capsys, "read", loc, "--format", "jsonl", "--limit", "0")
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == [1, 2, 3]
    code, out = run(capsys, "read", loc, "--snapshot-id", "0")
    assert code == 0 and "(no rows)" in out


@pytest.mark.slow
def test_read_accepts_a_delta_table_on_s3_configured_by_the_aws_environment(
    s3_props: dict[str, str],
) -> None:
    loc = f"s3://lake/cli-delta/{uuid.uuid4().hex}"
    table = DeltaTable.create(loc, pa.schema([("id", pa.int64())]), storage_options=s3_props)
    table.append(pa.table({"id": [1, 2]}))
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "AWS_ENDPOINT_URL": s3_props["s3.endpoint"],
        "AWS_ACCESS_KEY_ID": s3_props["s3.access-key-id"],
        "AWS_SECRET_ACCESS_KEY": s3_props["s3.secret-access-key"],
        "AWS_REGION": s3_props["s3.region"],
    }
    code = "from stream_sink.cli.main import main; raise SystemExit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", code, "read", loc, "--format", "jsonl"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(json.loads(line)["id"] for line in proc.stdout.splitlines()) == [1, 2]
