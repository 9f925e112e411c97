"""The command itself: --version, help texts with defaults, a closed pipe.

Tests stream_sink.cli.output: terminal output and a closed pipe."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.cli.main import HelpFormatter, build_parser, main
from stream_sink.commit.failpoints import FAILPOINTS

REPO = Path(__file__).resolve().parents[2]


def _parsers(
    parser: argparse.ArgumentParser, name: str = "stream-sink"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"stream-sink {ss.__version__}"


def test_every_option_says_what_it_does_and_its_default() -> None:
    for name, parser in _parsers(build_parser()):
        formatter = HelpFormatter(name)
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            where = f"{name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help and len(action.help) > 8, f"{where}: no help text"
            shown = formatter._get_help_string(action) % {"default": action.default}
            needs_default = action.option_strings and action.nargs != 0 and not action.required
            assert not needs_default or "default" in shown, f"{where}: no default in: {shown}"


def test_drill_help_lists_every_failpoint() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stream_sink.cli.main", "drill", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    ).stdout
    assert all(f"  {name}\n" in out for name in FAILPOINTS)


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    catalog = ss.load_catalog("local", type="hadoop", warehouse=str(wh))
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    for _ in range(40):  # enough output to fill the pipe after `head` has gone
        table.append(pa.table({"id": list(range(10))}))
    proc = subprocess.run(
        [
            "bash",
            "-c",
            f"set -o pipefail; {sys.executable} -m stream_sink.cli.main "
            f"table files db.t --warehouse {wh} | head -n 1",
        ],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("content")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env
