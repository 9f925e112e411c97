"""Fixtures of the drill's tests.

``fast_drivers``: the drill's driver processes start like the kill tests' drivers
(``kill_harness.short_driver_submit_args``): the drill's own JVM flags, and Spark's
classes mapped from a class data sharing archive (made once per installation and shared
with the kill tests). A drill test starts a driver per kill, and a driver of a few small
batches spends most of its time starting its JVM.
"""

from __future__ import annotations

import os

import pytest
from kill_harness import short_driver_submit_args

SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"


@pytest.fixture
def fast_drivers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``PYSPARK_SUBMIT_ARGS`` for the drill's drivers, unless the environment sets it."""
    if SUBMIT_ARGS not in os.environ:
        monkeypatch.setenv(SUBMIT_ARGS, short_driver_submit_args())
