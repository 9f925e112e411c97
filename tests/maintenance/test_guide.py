"""The maintenance guide (docs/maintenance.md) runs as written and does what it says: its
"From Python", "Inside the streaming job" and "From the command line" blocks in order in
one namespace, the ``stream-sink`` lines through the command's entry point."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from readers import pyiceberg_rows

from stream_sink.cli.main import main

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "maintenance.md"
SECTIONS = ("From Python", "Inside the streaming job", "From the command line")


def _blocks(section: str) -> list[tuple[str, str]]:
    text = GUIDE.read_text()
    start = text.index(f"## {section}")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else len(text)]
    return re.findall(r"```(\w+)\n(.*?)```", body, flags=re.DOTALL)


def test_maintenance_guide_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = [_blocks(section)[0] for section in SECTIONS]  # each section's first block
    assert [lang for lang, _ in blocks] == ["python", "python", "bash"]
    namespace: dict[str, object] = {}
    for lang, code in blocks:
        if lang == "python":
            exec(compile(code, str(GUIDE), "exec"), namespace)
            continue
        for line in code.strip().splitlines():
            assert main(shlex.split(line)[1:]) == 0, line
    out = capsys.readouterr().out
    assert "files to compact" in out and "rewrite-data-files" in out
    orders: Any = namespace["orders"]
    rows = sorted(orders.refresh().scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    expected = [{"id": 1, "status": "v5"}, {"id": 2, "status": "v5"}] + [
        {"id": 10 + i, "status": f"v{i}"} for i in range(6)
    ]
    assert rows == expected
    assert len(orders.snapshots()) == 1
    got = sorted(pyiceberg_rows(orders.metadata_location), key=lambda r: r["id"])
    assert got == expected
