"""The layering rules, checked on the code's own imports (no Spark). CONTRIBUTING.md's
"Layout" section lists the same floors.

Every ``import`` and ``from … import`` under ``stream_sink/`` is parsed (including those
inside functions and under ``TYPE_CHECKING``) and must point to the same floor or
lower. Floors, top to bottom:

    cli → ops → demo → spark → commit → tables/catalogs → maintenance
        → write, read → table, delta → io, state, checkpoints, metrics, exceptions, …

(maintenance sits under the user-facing table, whose ``table.maintenance`` returns
it, as pyiceberg's table offers its maintenance; it needs neither commit/ nor
tables/: the sink hands it what it needs, such as its uncommitted files.)

Besides: only ``spark/`` imports pyspark, only ``state/`` imports rocksdict, only ``io/``
imports boto3 (S3's conditional PUT, an optional extra), ``table/``
and ``delta/`` never import each other, nothing outside ``cli/`` imports ``cli/``, and
the format-agnostic part of ``commit/`` reaches a table format only through the target
interface (``commit/target.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import stream_sink

ROOT = Path(stream_sink.__file__).parent

FLOORS: dict[str, int] = {
    "cli": 10,
    "ops": 9,
    "demo": 8,
    "spark": 7,
    "commit": 6,
    "tables": 5,
    "catalogs": 5,
    "maintenance": 4,
    "write": 3,
    "read": 3,
    "table": 2,
    "delta": 2,
    "io": 1,
    "bitmaps": 1,
    "state": 1,
    "checkpoints": 1,
    "metrics": 1,
    "exceptions": 1,
    "envelope": 1,
    "failpoints": 1,
}
"""Top-level packages and modules of ``stream_sink`` and their floor; the package's own
``__init__`` (lazy re-exports for users) is not a floor."""

ONLY_IMPORTED_BY = {
    "pyspark": {"spark"},
    "py4j": {"spark"},
    "rocksdict": {"state"},
    "boto3": {"io"},
    "botocore": {"io"},
}
NEVER_EACH_OTHER = ({"table", "delta"},)


FORMAT_AGNOSTIC = {
    f"stream_sink.commit.{m}"
    for m in ("committer", "target", "shapes", "committer_state", "state_recovery")
}
"""Modules of ``commit/`` that know no table format."""
FORMAT_SPECIFIC = (
    "stream_sink.table",
    "stream_sink.delta",
    "stream_sink.write",
    "stream_sink.commit.iceberg_target",
    "stream_sink.commit.delta_target",
    "stream_sink.commit.staging",
    "stream_sink.commit.table_commit",
    "stream_sink.commit.watermark",
)


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts == ("__init__",):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(("stream_sink", *parts)), path


def imports_of(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import statement of ``module``."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:  # ``from stream_sink import spark`` names a package
                yield node.lineno, f"{target}.{alias.name}"


def top_of(module: str) -> str | None:
    """The ``stream_sink`` top-level package or module of ``module`` (None: outside)."""
    parts = module.split(".")
    if parts[0] != "stream_sink" or len(parts) < 2:
        return None
    return parts[1]


def violations() -> list[str]:
    found: list[str] = []
    for module, path in modules():
        here = top_of(module)
        assert here in FLOORS, f"{module}: {here!r} has no floor; add it to FLOORS"
        for line, target in imports_of(module, path):
            where = f"{path.relative_to(ROOT.parent)}:{line} imports {target}"
            root = target.split(".")[0]
            if root in ONLY_IMPORTED_BY and here not in ONLY_IMPORTED_BY[root]:
                found.append(f"{where}: only {sorted(ONLY_IMPORTED_BY[root])} may")
            if module in FORMAT_AGNOSTIC and target.startswith(FORMAT_SPECIFIC):
                found.append(f"{where}: {module} must reach formats through the target")
            there = top_of(target)
            if there is None or there == here or there not in FLOORS:
                continue
            if FLOORS[there] > FLOORS[here]:
                found.append(f"{where}: {there}/ is on a higher floor than {here}/")
            if any({here, there} == pair for pair in NEVER_EACH_OTHER):
                found.append(f"{where}: {here}/ and {there}/ never import each other")
    return found


def test_every_import_points_down_the_floors() -> None:
    assert violations() == []


def test_every_top_level_package_has_a_floor() -> None:
    tops = {
        p.stem if p.is_file() else p.name
        for p in ROOT.iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "__init__.py"
    }
    assert tops - set(FLOORS) == set()


@pytest.mark.parametrize(
    ("module", "target", "why"),
    [
        ("stream_sink.table.x", "stream_sink.spark.sink", "higher floor"),
        ("stream_sink.table.x", "stream_sink.delta.log", "never import each other"),
        ("stream_sink.write.x", "pyspark.sql", "only ['spark'] may"),
        ("stream_sink.commit.committer", "stream_sink.table.table", "through the target"),
    ],
)
def test_the_checker_catches_an_upward_arrow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, target: str, why: str
) -> None:
    package = tmp_path / "stream_sink" / module.split(".")[1]
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / f"{module.split('.')[2]}.py").write_text(f"import {target}\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path / "stream_sink")
    (found,) = violations()
    assert why in found and target in found
