"""Layering of the Delta target: ``delta/`` knows nothing of Iceberg, the writers, the
committer or Spark; the protocol core of ``commit/`` imports no table format."""

from __future__ import annotations

import ast
from pathlib import Path

import stream_sink

ROOT = Path(stream_sink.__file__).parent
CORE = sorted(p.name for p in (ROOT / "commit").glob("*.py") if p.name != "__init__.py")
"""The protocol core: every module at ``commit/``'s top."""


def imported(path: Path) -> set[str]:
    """Absolute stream_sink modules ``path`` imports (relative imports resolved)."""
    package = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
    return {m for m in out if m.startswith("stream_sink")}


def test_delta_package_imports_no_iceberg_writer_committer_or_spark() -> None:
    banned = ("stream_sink.table", "stream_sink.write", "stream_sink.commit", "stream_sink.spark")
    for path in sorted((ROOT / "delta").glob("*.py")):
        bad = sorted(m for m in imported(path) if m.startswith(banned))
        assert not bad, f"{path.name} imports {bad}"


def test_commit_protocol_core_imports_no_table_format() -> None:
    banned = (
        "stream_sink.table",
        "stream_sink.delta",
        "stream_sink.write",
        "stream_sink.commit.iceberg",
        "stream_sink.commit.delta",
    )
    for name in CORE:
        bad = sorted(m for m in imported(ROOT / "commit" / name) if m.startswith(banned))
        assert not bad, f"commit/{name} imports {bad}"


def test_only_the_delta_adapters_import_delta() -> None:
    allowed = {
        "spark/foreach_batch/delta.py",
        "spark/tasks/delta.py",
        "spark/runtime.py",
        "spark/foreach_batch/copy_on_write.py",
        "spark/datasource/delta/commit.py",
        "spark/datasource/delta/write.py",
        "spark/datasource/delta/options.py",  # its maintenance options are Delta's
        "cli/delta_commands.py",
        "ops/drill/run.py",
        "ops/drill/jobs.py",
        "ops/drill/delete_files.py",  # a Delta positions drill's check: no version rewrote
        "ops/status/__init__.py",  # a Delta sink's maintenance report, in its own counts
        "ops/status/delta.py",  # a Delta sink's table: version, files, txn watermark
        "cli/status.py",  # their lines; --table as a Delta table's path
        "cli/source_positions.py",  # status --table of a Delta table's path
        "ops/source_positions.py",  # source positions read back from either format
    }
    for path in sorted(ROOT.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel.startswith(("delta/", "commit/delta/")) or rel in allowed:
            continue
        bad = sorted(m for m in imported(path) if m.startswith("stream_sink.delta"))
        assert not bad, f"{rel} imports {bad}"
