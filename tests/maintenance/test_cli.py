"""``stream-sink maintain``: a readable summary or --json, --dry-run changes nothing, and
exit 1 with a one-line reason when it gives up.

Tests stream_sink.maintenance.results: each action's result in the summary and --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from maint_support import make_cdc_table, ours

from stream_sink.catalogs import load_catalog
from stream_sink.cli.main import main
from stream_sink.cli.maintain import parse_duration_ms
from stream_sink.exceptions import InvalidOptionError


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    wh = str(tmp_path / "wh")
    catalog = load_catalog("local", type="hadoop", warehouse=wh)
    catalog.create_namespace("db")
    make_cdc_table(catalog, "db.t", batches=6, rows=20, seed=9)
    return wh


def test_json_summary(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = load_catalog("local", type="hadoop", warehouse=warehouse).load_table("db.t")
    expected = ours(table)
    code = main(
        [
            "maintain",
            "db.t",
            "--rewrite-data-files",
            "--convert-equality-deletes",
            "--min-input-files",
            "2",
            "--json",
            "--warehouse",
            warehouse,
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    before, after = report["before"], report["after"]
    assert after["data_files"] < before["data_files"]
    assert before["equality_deletes"] > 0 and after["equality_deletes"] == 0
    actions = [r["action"] for r in report["results"]]
    assert actions == ["rewrite-data-files", "remove-dangling-deletes", "convert-equality-deletes"]
    assert ours(table) == expected


def test_dry_run_and_human_output(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = load_catalog("local", type="hadoop", warehouse=warehouse).load_table("db.t")
    location = table.metadata_location
    assert (
        main(
            [
                "maintain",
                "db.t",
                "--rewrite-data-files",
                "--convert-equality-deletes",
                "--remove-orphan-files",
                "--dry-run",
                "--warehouse",
                warehouse,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "dry run" in out and '"groups"' in out and '"equality_delete_files"' in out
    assert table.refresh().metadata_location == location
    assert main(["maintain", "db.t", "--rewrite-data-files", "--warehouse", warehouse]) == 0
    out = capsys.readouterr().out
    assert "before" in out and "after" in out and "rewrite-data-files:" in out


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--expire-snapshots", "--older-than", "soon"], "duration 'soon'"),
        (["--rewrite-data-files", "--table-missing"], None),
        ([], "no action chosen"),
    ],
)
def test_gives_up_with_one_line(
    warehouse: str, capsys: pytest.CaptureFixture[str], args: list[str], reason: str | None
) -> None:
    if reason is None:  # argparse refuses unknown options with its own exit code
        with pytest.raises(SystemExit):
            main(["maintain", "db.t", *args, "--warehouse", warehouse])
        return
    assert main(["maintain", "db.t", *args, "--warehouse", warehouse]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and reason in err


def test_missing_table_gives_up(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maintain", "db.nope", "--all", "--warehouse", warehouse]) == 1
    assert "db.nope" in capsys.readouterr().err


def test_durations() -> None:
    assert [parse_duration_ms(d) for d in ("0s", "90s", "15m", "6h", "3d")] == [
        0,
        90_000,
        900_000,
        21_600_000,
        259_200_000,
    ]
    with pytest.raises(InvalidOptionError):
        parse_duration_ms("3 weeks")
