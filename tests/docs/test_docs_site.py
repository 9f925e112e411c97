"""docs/ builds without a warning, and its reference pages match the code."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

from code_blocks import REPO

from stream_sink.cli.reference import MARKER, markdown
from stream_sink.spark import DeltaSink, IcebergSink


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "sink-options" / "index.html").exists()


def test_every_sink_option_is_documented_with_its_default() -> None:
    text = (REPO / "docs" / "sink-options.md").read_text()
    iceberg, delta = text.split("<!-- delta-options -->", 1)
    for sink, section in ((IcebergSink, iceberg), (DeltaSink, delta.split("\n## ", 1)[0])):
        rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, flags=re.M))
        params = inspect.signature(sink.__init__).parameters
        for name, p in params.items():
            if name == "self":
                continue
            where = f"docs/sink-options.md, {sink.__name__}({name}=...)"
            assert name in rows, f"{where}: no row"
            shown = rows[name].strip().strip("`")
            want = "required" if p.default is inspect.Parameter.empty else repr(p.default)
            assert shown == want.replace("'", '"'), f"{where}: documented {shown}, default {want}"
        assert set(rows) <= set(params), (
            f"{sink.__name__}: documented options that do not exist: {set(rows) - set(params)}"
        )


def test_the_command_line_reference_is_up_to_date() -> None:
    page = (REPO / "docs" / "cli.md").read_text()
    assert MARKER in page
    generated = page.split(MARKER, 1)[1].strip()
    assert generated == markdown().strip(), (
        "docs/cli.md is out of date: run `python -m stream_sink.cli.reference docs/cli.md`"
    )


def test_every_data_source_option_is_documented() -> None:
    from stream_sink.spark.datasource.delta.options import DELTA_OPTIONS
    from stream_sink.spark.datasource.options import NOT_ON_THIS_ROUTE, SINK_OPTIONS

    text = (REPO / "docs" / "spark-datasource.md").read_text()
    iceberg, delta = text.split("## Delta Lake as the target", 1)
    for name in (*SINK_OPTIONS, *NOT_ON_THIS_ROUTE):
        assert f"| `{name}` |" in iceberg, f"docs/spark-datasource.md: no row for {name!r}"
    for name in ("target", *DELTA_OPTIONS):
        assert f"| `{name}` |" in delta, f"docs/spark-datasource.md, Delta: no row for {name!r}"
