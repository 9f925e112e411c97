"""The tests' ``xdist_group`` marks, applied by ``make test``'s workers (``--dist
loadgroup``) under pytest 9.

xdist 3.8 groups tests by renaming each item ``<nodeid>@<group>`` through
``item._nodeid``, which pytest 9 no longer reads (an item's id is ``item._id``): every
test would be a unit of its own, a module's tests would be split between the workers,
and each worker would set up the module's fixtures (a JVM, a Spark cluster, Kafka) for
its share, both at once. Here the workers write each test's group to a file named by
``GROUPS_ENV`` (set by the controller before they start), and the controller's
scheduler reads it.

Invariants: a test whose group is unknown is a unit of its own; the units are handed
out in the order the workers collected them (xdist's reordering off).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any

GROUPS_ENV = "STREAM_SINK_XDIST_GROUPS"


def groups(items: list[Any], spark_group: str) -> dict[str, str]:
    """Each test's ``xdist_group``: a test using the session's Spark in ``spark_group``; a
    test marked ``spread`` (it shares nothing with the others of its module: a killed
    driver, a docs page) alone; every other test its file's, or ``spark_group`` when any
    test of its file uses the session's Spark.

    Invariant: the tests of a module that are not ``spread`` share one group, so they run
    on one worker, one after another, and the module's fixtures are set up once (a
    module fixture that creates tables in a shared server cannot run twice)."""

    def uses_spark(item: Any) -> bool:
        return "spark" in getattr(item, "fixturenames", ())

    spark_files = {file_of(i.nodeid) for i in items if uses_spark(i)}
    group = {}
    for item in items:
        if uses_spark(item) or (
            file_of(item.nodeid) in spark_files and not item.get_closest_marker("spread")
        ):
            group[item.nodeid] = spark_group
        elif item.get_closest_marker("spread"):
            group[item.nodeid] = item.nodeid
        else:
            group[item.nodeid] = file_of(item.nodeid)
    return group


def file_of(nodeid: str) -> str:
    """The test file of a test id."""
    return nodeid.split("::", 1)[0]


def start(config: Any) -> None:
    """On the controller, before the workers start: the file they will write to, and
    xdist told to keep the order they collect in."""
    config.option.loadscopereorder = False
    fd, path = tempfile.mkstemp(prefix="stream-sink-xdist-groups-", suffix=".json")
    os.close(fd)
    os.environ[GROUPS_ENV] = path  # the workers inherit it


def finish() -> None:
    """On the controller, at the end: the file removed."""
    path = os.environ.pop(GROUPS_ENV, None)
    if path:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def record(groups: dict[str, str]) -> None:
    """On a worker, after collection: each test's group (every worker collects the same
    tests, so whichever writes last writes the same map)."""
    path = os.environ.get(GROUPS_ENV)
    if not path:
        return
    partial = f"{path}.{os.getpid()}"
    with open(partial, "w") as f:
        json.dump(groups, f)
    os.replace(partial, path)


def scheduler(config: Any, log: Any) -> Any:
    """A ``--dist loadgroup`` scheduler that groups by the recorded groups."""
    from xdist.scheduler import LoadScopeScheduling

    class RecordedGroups(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                path = os.environ.get(GROUPS_ENV, "")
                try:
                    with open(path) as f:
                        self.groups = json.load(f)
                except (OSError, ValueError):
                    self.groups = {}
            return self.groups.get(nodeid, nodeid)

    return RecordedGroups(config, log)
