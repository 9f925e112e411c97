"""``stream-sink drill --catalog-type rest``: the demo's upsert pipeline into tables of
SeaweedFS's REST catalog (tables on its S3), each scenario in a namespace of its own,
killed inside the commit protocol and restarted: every row exactly once. The catalog's
OAuth2 client secret and the S3 secret key (one secret, SeaweedFS's S3 key) appear in
none of what the drill leaves: its printed table and progress, its log lines, the report,
any file of its work dir (plans, status files, checkpoints, state, the drivers' logs),
and any object of the tables it wrote."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from stream_sink.cli.main import main
from stream_sink.io import FileIO

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.usefixtures("fast_drivers"),  # tests/ops/conftest.py
]
FAILPOINTS = "after-table-commit"
"""Killed with the REST commit done and the operator state not yet cleaned up: the restart
must find its commit in the catalog's snapshots. A kill with the batch staged but not
committed, on both REST servers, is in tests/spark/foreach_batch/test_iceberg_rest_kill.py."""


def test_drill_on_a_rest_catalog_keeps_rows_exactly_once_and_leaks_no_secret(
    tmp_path: Path,
    seaweed: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    cli = ["--catalog-type", "rest", "--catalog-uri", seaweed.catalog_uri]
    cli += ["--warehouse", "s3://warehouse"]
    # OAuth2 client credentials for the catalog, S3 keys for the table bucket
    cli += ["--catalog-property", f"credential={seaweed.access_key}:{seaweed.secret_key}"]
    for key, value in seaweed.s3_props.items():
        cli += ["--catalog-property", f"{key}={value}"]
    report_path = tmp_path / "report.json"
    work = tmp_path / "work"
    code = main(
        [
            "drill",
            "--work-dir",
            str(work),
            "--json",
            str(report_path),
            "--failpoints",
            FAILPOINTS,
            "--mode",
            "upsert",
            "--rows",
            "400",
            *cli,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, out + err[-3000:]
    report = json.loads(report_path.read_text())
    assert report["ok"] is True
    assert len(report["scenarios"]) == 1
    for s in report["scenarios"]:
        assert s["verdict"] == "ok" and s["duplicated"] == s["missing"] == 0
        assert s["found_rows"] == s["expected_rows"] > 0
        assert s["restarts"] == 1 and s["reached"] is True

    # the tables are where the drill says: one namespace per scenario in the REST catalog
    from stream_sink.catalogs import load_catalog

    catalog = load_catalog("check", type="rest", **seaweed.rest_props("warehouse"))
    namespaces = [n for n in catalog.list_namespaces() if n[0].startswith("drill_")]
    tables = [catalog.load_table((*ns, "orders")) for ns in namespaces]
    assert len([t for t in tables if t.current_snapshot() is not None]) >= 1

    secret = seaweed.secret_key
    leaks = [name for name, text in (("stdout", out), ("stderr", err)) if secret in text]
    leaks += [f"log: {r.getMessage()[:80]}" for r in caplog.records if secret in r.getMessage()]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".log") for p in files)  # the drivers' logs were searched
    leaks += [str(p) for p in files if secret.encode() in p.read_bytes()]
    store = FileIO.for_location("s3://warehouse", seaweed.s3_props)
    for table in tables:
        for f in store.walk(table.location):
            location = f"{table.location}/{f.relative}"
            if secret.encode() in store.read_bytes(location):
                leaks.append(location)
    assert not leaks, f"the secret appears in: {leaks}"
