r"""Every module is found from its tests: each ``.py`` file under ``stream_sink/`` is named
by at least one test file (no Spark). ``docs/design.md``'s "Where a module's tests are"
states the same rule.

A module's name is its dotted path: ``stream_sink.a.b`` for ``stream_sink/a/b.py``, and
``stream_sink.a`` for a package's ``stream_sink/a/__init__.py``. A test file (a
``test_*.py`` under ``tests/``, outside ``tests/architecture/``, whose checks cover every
module alike) names a module when that name occurs in it whole, not as the start of a
longer name: ``stream_sink.write.result`` is named neither by ``stream_sink.write.results``
nor by ``stream_sink.write.result.x``. It occurs in an import (``import stream_sink.a.b``,
``from stream_sink.a.b import x``) or, for a module the file reaches through a package's
face, in the file's docstring (``Tests stream_sink.a.b: ...``). The same search by hand,
for one module::

    grep -rlP --include='test_*.py' --exclude-dir=architecture 'stream_sink\.a\.b(?!\w|\.\w)' tests

:data:`NOT_YET_NAMED` lists the modules no test file names yet, a baseline that may only
shrink: the check fails for a module outside it that no test file names, for an entry some
test file names now (drop it from the list), and for an entry that is no longer a module.
"""

from __future__ import annotations

import re
from pathlib import Path

import stream_sink

ROOT = Path(stream_sink.__file__).parent
TESTS = Path(__file__).resolve().parents[1]

NOT_YET_NAMED = frozenset(
    {
        "stream_sink.bitmaps",  # a package docstring only
        "stream_sink.cli",  # an empty package file
        "stream_sink.demo",  # a package docstring only
        "stream_sink.metrics",  # a package docstring only
        "stream_sink.ops",  # a package docstring only
        "stream_sink.ops.drill",  # a package docstring only
        "stream_sink.parquet",  # a package docstring only
        "stream_sink.read.delete_index",  # re-exports stream_sink.table.delete_index
        "stream_sink.spark.cdc",  # re-exports .debezium lazily
        "stream_sink.spark.datasource.delta",  # a package docstring only
        "stream_sink.spark.foreach_batch",  # a package docstring only
        "stream_sink.spark.read",  # a package docstring only
        "stream_sink.spark.tasks",  # a package docstring only
        "stream_sink.table.catalog.rest",  # re-exports RestCatalog
    }
)
"""Modules no test file names yet; a package ``__init__.py`` that only re-exports what its
modules define may stay here. Only ever remove entries."""


def module_names(root: Path = ROOT) -> list[str]:
    """The dotted name of every ``.py`` file under ``root`` (a package's is its folder's)."""
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def files_of_tests(tests: Path = TESTS) -> dict[Path, str]:
    """Every test file's text, but the architecture checks'."""
    return {
        path: path.read_text(encoding="utf-8")
        for path in sorted(tests.rglob("test_*.py"))
        if "architecture" not in path.relative_to(tests).parts
    }


def named(module: str, texts: dict[Path, str]) -> list[Path]:
    """The test files naming ``module`` whole (not as the start of a longer name)."""
    pattern = re.compile(re.escape(module) + r"(?!\w|\.\w)")
    return [path for path, text in texts.items() if pattern.search(text)]


def unnamed(modules: list[str], texts: dict[Path, str]) -> set[str]:
    return {m for m in modules if not named(m, texts)}


def test_every_module_is_named_by_a_test_file() -> None:
    missing = sorted(unnamed(module_names(), files_of_tests()) - NOT_YET_NAMED)
    assert not missing, (
        "modules no test file names (put the module's dotted path in the docstring of the "
        f"test file that tests it: 'Tests {missing[0]}: ...'): {missing}"
    )


def test_the_baseline_only_shrinks() -> None:
    modules = module_names()
    gone = sorted(NOT_YET_NAMED - set(modules))
    assert not gone, f"NOT_YET_NAMED lists what is no longer a module: {gone}"
    now_named = sorted(NOT_YET_NAMED - unnamed(modules, files_of_tests()))
    assert not now_named, f"named by a test file now, drop from NOT_YET_NAMED: {now_named}"


def test_the_search_takes_whole_names_only(tmp_path: Path) -> None:
    package = tmp_path / "stream_sink"
    (package / "write").mkdir(parents=True)
    for name in ("__init__.py", "write/__init__.py", "write/result.py", "write/results.py"):
        (package / name).write_text('"""A module."""\n')
    assert module_names(package) == [
        "stream_sink",
        "stream_sink.write",
        "stream_sink.write.result",
        "stream_sink.write.results",
    ]
    tests = tmp_path / "tests"
    (tests / "write").mkdir(parents=True)
    (tests / "write" / "test_results.py").write_text(
        '"""Tests stream_sink.write.results: its counts."""\n'
        "from stream_sink.write.results import Results\n"
    )
    (tests / "architecture").mkdir()
    (tests / "architecture" / "test_layout.py").write_text("NAMES = ['stream_sink.write']\n")
    (tests / "write" / "support.py").write_text("import stream_sink.write.result\n")
    texts = files_of_tests(tests)
    assert list(texts) == [tests / "write" / "test_results.py"]
    assert unnamed(module_names(package), texts) == {
        "stream_sink",
        "stream_sink.write",
        "stream_sink.write.result",
    }
