"""The workers' groups keep a module's fixtures set up once: its tests that are not
``spread`` run in one group (``tests/xdist_groups.py``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pytest
import xdist_groups


@dataclass
class FakeItem:
    nodeid: str
    fixturenames: tuple[str, ...] = ()
    marks: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_a_module_with_one_spark_test_runs_whole_in_the_spark_group() -> None:
    """The CDC events module: most tests use the Spark session and a module fixture that
    creates tables in a shared PostgreSQL; one test uses only that fixture. Split apart,
    the fixture ran twice and its tables already existed."""
    items = [
        FakeItem("tests/cdc/test_events.py::test_a", ("spark", "debezium")),
        FakeItem("tests/cdc/test_events.py::test_status", ("debezium",)),
        FakeItem("tests/cdc/test_events.py::test_kill", (), ("spread",)),
        FakeItem("tests/table/test_plain.py::test_x"),
        FakeItem("tests/table/test_plain.py::test_y"),
        FakeItem("tests/spark/test_kill.py::test_k", (), ("spread", "slow")),
    ]
    group = xdist_groups.groups(items, "spark-session")
    assert group == {
        "tests/cdc/test_events.py::test_a": "spark-session",
        "tests/cdc/test_events.py::test_status": "spark-session",
        "tests/cdc/test_events.py::test_kill": "tests/cdc/test_events.py::test_kill",
        "tests/table/test_plain.py::test_x": "tests/table/test_plain.py",
        "tests/table/test_plain.py::test_y": "tests/table/test_plain.py",
        "tests/spark/test_kill.py::test_k": "tests/spark/test_kill.py::test_k",
    }


def test_every_collected_module_keeps_its_tests_that_are_not_spread_in_one_group(
    request: pytest.FixtureRequest,
) -> None:
    """Over the tests this run collected (the whole suite under ``make test``)."""
    by_file: dict[str, set[str]] = defaultdict(set)
    for item in request.session.items:
        mark = item.get_closest_marker("xdist_group")
        assert mark is not None, item.nodeid
        if not item.get_closest_marker("spread"):
            by_file[xdist_groups.file_of(item.nodeid)].add(mark.args[0])
    split = {f: g for f, g in by_file.items() if len(g) > 1}
    assert not split, split
