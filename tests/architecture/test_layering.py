"""The layering rules, checked on the code's own imports (no Spark). CONTRIBUTING.md's
"Layout" section lists the same floors.

Every ``import`` and ``from … import`` under ``stream_sink/`` is parsed (including those
inside functions and under ``TYPE_CHECKING``) and must point to the same floor or
lower. Floors, top to bottom:

    cli → ops → demo → spark → commit → tables/catalogs → maintenance
        → write, read → table, delta → io, parquet, bitmaps, lookup, state, checkpoints,
        metrics, exceptions, secrets, …

(maintenance sits under the user-facing table, whose ``table.maintenance`` returns
it, as pyiceberg's table offers its maintenance; it needs neither commit/ nor
tables/: the sink hands it what it needs, such as its uncommitted files.)

Besides: only ``spark/`` imports pyspark, only ``state/`` imports rocksdict, only ``io/``
imports boto3 (S3's conditional PUT, an optional extra), ``table/``
and ``delta/`` never import each other, nothing outside ``cli/`` imports ``cli/``, and
the protocol at ``commit/``'s top (every ``commit/*.py``) imports no table format: not
``table/``, ``write/``, ``delta/``, ``commit/iceberg/`` or ``commit/delta/`` (it reaches a
format only through the target interface, ``commit/target.py``), nor does importing
``stream_sink.commit`` load one.

Inside ``spark/``, sub-packages by front door: ``foreach_batch/`` (``IcebergSink``,
``DeltaSink``, the router), ``datasource/`` (``format("stream_sink")``), ``read/``
(``read_table``), ``cdc/`` (CDC preparation, which every front door uses) and ``tasks/``
(what the sinks' executors run, one module per table format); what they share sits at
``spark/``'s top (among them ``runtime.py``, which opens every front door's commit
driver). Front doors do not import each other, the shared modules, ``cdc/`` and
``tasks/`` import no front door, ``tasks/`` no sub-package but ``cdc/``, and ``cdc/``
takes from the shared modules only ``errors``. Only the commit driver
(``commit/driver.py``) calls the committer's protocol steps; no file name repeats a
folder's name as a prefix.
"""

from __future__ import annotations

import ast
import subprocess
import sys
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
    "parquet": 1,
    "bitmaps": 1,
    "lookup": 1,
    "state": 1,
    "checkpoints": 1,
    "metrics": 1,
    "exceptions": 1,
    "envelope": 1,
    "failpoints": 1,
    "secrets": 1,
    "retry": 1,
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


TABLE_FORMATS = (
    "stream_sink.table",
    "stream_sink.delta",
    "stream_sink.write",
    "stream_sink.commit.iceberg",
    "stream_sink.commit.delta",
)
"""What the protocol at ``commit/``'s top never imports: Iceberg (``table/``, its writers
``write/``, its target ``commit/iceberg/``) and Delta Lake (``delta/``, ``commit/delta/``)."""


def is_protocol(path: Path) -> bool:
    """A module at ``commit/``'s top (``commit/*.py``), the package's own ``__init__``
    (its lazy public names, checked by importing it) aside."""
    return path.parent == ROOT / "commit" and path.name != "__init__.py"


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


def is_format(module: str) -> bool:
    """``module`` is, or is inside, one of :data:`TABLE_FORMATS`."""
    return any(module == f or module.startswith(f"{f}.") for f in TABLE_FORMATS)


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
            if is_protocol(path) and is_format(target):
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


def test_importing_the_commit_package_loads_no_table_format() -> None:
    """``stream_sink.commit``'s Iceberg names (``IcebergTarget``, …) load on first use."""
    probe = (
        "import sys, stream_sink.commit\n"
        f"print(sorted(m for m in sys.modules if m.startswith({TABLE_FORMATS!r})))"
    )
    out = subprocess.run(  # in this checkout (``-c`` puts the working directory first)
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT.parent
    ).stdout
    assert out.strip() == "[]"


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
        ("stream_sink.table.x", "stream_sink.spark.foreach_batch.iceberg", "higher floor"),
        ("stream_sink.table.x", "stream_sink.delta.log", "never import each other"),
        ("stream_sink.write.x", "pyspark.sql", "only ['spark'] may"),
        ("stream_sink.commit.committer", "stream_sink.table.table", "through the target"),
        ("stream_sink.commit.schedule", "stream_sink.commit.iceberg.staging", "through the target"),
        ("stream_sink.commit.x", "stream_sink.commit.delta.target", "through the target"),
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


# --- spark/ by front door ------------------------------------------------------------------

SPARK = "stream_sink.spark"
FRONT_DOORS = {"foreach_batch", "datasource", "read"}
SPARK_MAY_IMPORT: dict[str | None, set[str]] = {
    None: {"cdc", "tasks"},  # the shared modules at spark/'s top
    "cdc": set(),
    "tasks": {"cdc"},
    "read": set(),
    "foreach_batch": {"cdc", "tasks"},
    "datasource": {"cdc", "tasks"},
}
"""Which of spark/'s sub-packages the modules of each may import (besides their own)."""
CDC_SHARED = {"errors"}
"""The shared modules at spark/'s top that cdc/ may import."""


def spark_part(module: str) -> tuple[str | None, str] | None:
    """(sub-package, or None for spark/'s top; the next name) of a ``stream_sink.spark``
    module; None outside spark/ and for spark/ itself (its lazy public names)."""
    parts = module.split(".")
    if parts[:2] != ["stream_sink", "spark"] or len(parts) < 3:
        return None
    if parts[2] in SPARK_MAY_IMPORT:
        return parts[2], ".".join(parts[3:])
    return None, parts[2]


def spark_violations() -> list[str]:
    found: list[str] = []
    for module, path in modules():
        here = spark_part(module)
        if here is None:
            continue
        for line, target in imports_of(module, path):
            there = spark_part(target)
            if there is None or there[0] == here[0]:
                continue
            where = f"{path.relative_to(ROOT.parent)}:{line} imports {target}"
            if there[0] is not None and there[0] not in SPARK_MAY_IMPORT[here[0]]:
                found.append(f"{where}: spark/{here[0] or ''} may not import spark/{there[0]}/")
            if here[0] == "cdc" and there[0] is None and there[1] not in CDC_SHARED:
                found.append(f"{where}: cdc/ takes only {sorted(CDC_SHARED)} from spark/")
    return found


def test_spark_sub_packages_import_only_what_they_may() -> None:
    assert spark_violations() == []


def test_spark_sub_packages_are_the_known_ones() -> None:
    subs = {p.name for p in (ROOT / "spark").iterdir() if (p / "__init__.py").exists()}
    assert subs == set(SPARK_MAY_IMPORT) - {None}


def test_commit_knows_nothing_of_spark() -> None:
    found = [
        f"{module}:{line} imports {target}"
        for module, path in modules()
        if module.startswith("stream_sink.commit")
        for line, target in imports_of(module, path)
        if target.split(".")[0] in {"pyspark", "py4j"} or target.startswith(SPARK)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("module", "target", "why"),
    [
        ("stream_sink.spark.cdc.x", "stream_sink.spark.foreach_batch.iceberg", "may not import"),
        ("stream_sink.spark.plan", "stream_sink.spark.datasource.commit", "may not import"),
        ("stream_sink.spark.foreach_batch.x", "stream_sink.spark.read.tasks", "may not import"),
        ("stream_sink.spark.cdc.x", "stream_sink.spark.plan", "takes only"),
    ],
)
def test_the_spark_checker_catches_a_forbidden_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, target: str, why: str
) -> None:
    path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True)
    for folder in [path.parent, *path.parent.parents][: len(module.split(".")) - 1]:
        (folder / "__init__.py").touch()
    path.write_text(f"import {target}\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path / "stream_sink")
    (found,) = spark_violations()
    assert why in found and target in found


def test_no_file_name_repeats_its_folder() -> None:
    """``spark/source_commit.py`` belongs in ``spark/datasource/commit.py``."""
    found = [
        str(path.relative_to(ROOT.parent))
        for _, path in modules()
        for folder in path.relative_to(ROOT.parent).parts[:-1]
        if path.stem.startswith(f"{folder}_")
    ]
    assert found == []


# --- one driver of the commit protocol ---------------------------------------------------------

PROTOCOL_STEPS = {
    "process",
    "snapshot_state",
    "complete_checkpoint",
    "notify_checkpoint_complete",
    "plan_checkpoint",
    "commit_leading",
    "finish_checkpoint",
    "restore",
}
DRIVER = "stream_sink.commit.driver"
COMMITTER = "stream_sink.commit.committer"


def protocol_calls(root: Path) -> list[str]:
    """Calls of a protocol step outside the driver (the committer's calls on itself,
    ``self.<step>``, are its own restore finishing a job)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(p for p in parts if p != "__init__")
        if module == DRIVER:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in PROTOCOL_STEPS:
                continue
            own = isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
            if module == COMMITTER and own:
                continue
            found.append(f"{module}:{node.lineno} calls {ast.unparse(node.func)}()")
    return found


def test_only_the_driver_calls_the_protocol_steps() -> None:
    assert protocol_calls(ROOT) == []


def test_the_protocol_check_catches_a_second_caller(tmp_path: Path) -> None:
    front = tmp_path / "stream_sink" / "spark" / "sink.py"
    front.parent.mkdir(parents=True)
    front.write_text("def checkpoint(c, n):\n    c.snapshot_state(n)\n")
    assert protocol_calls(tmp_path / "stream_sink") == [
        "stream_sink.spark.sink:2 calls c.snapshot_state()"
    ]
