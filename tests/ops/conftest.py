"""The shared local Spark session (``spark``) for the operations tests; tests that use
it are marked ``spark``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stream_sink.spark.session import local_session


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()) and Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_session("stream-sink-tests")
    yield session
    session.stop()

