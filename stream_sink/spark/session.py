"""A local SparkSession with defaults that suit small machines and tests.

Invariants:
- Executors run the interpreter that has stream_sink installed: ``PYSPARK_PYTHON``
  is set to the running interpreter when unset (Spark's default, ``python3`` on
  PATH, usually lacks the package).
- Arrow is on (``mapInArrow`` and ``toArrow`` move Arrow batches, not rows), the UI
  is off, and shuffles use few partitions: a micro-batch of a local stream is small.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SECRET_KEYS = "(?i)secret|password|token|access[.]key|credential"
"""Option and property names whose values Spark redacts wherever it shows them."""

LOCAL_DEFAULTS: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.stopActiveRunOnRestart": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.python.worker.reuse": "true",
    # Spark's defaults plus ``credential`` (a REST catalog's OAuth2 client secret, passed
    # as the ``catalog.credential`` option): masked in the UI, plans and event logs
    "spark.redaction.regex": SECRET_KEYS,
    "spark.sql.redaction.options.regex": f"(?i)url|{SECRET_KEYS.removeprefix('(?i)')}",
}
"""Applied by :func:`local_session` unless the caller's ``conf`` sets the key."""


def ensure_python_env() -> None:
    """Point Spark's Python workers (and driver) at this interpreter when unset."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_session(
    app_name: str = "stream-sink",
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create a SparkSession on ``master`` with :data:`LOCAL_DEFAULTS`.

    ``master`` may also be a cluster URL (``spark://host:7077``); the defaults then
    still apply unless ``conf`` overrides them.
    """
    ensure_python_env()
    from pyspark.sql import SparkSession

    settings = {**LOCAL_DEFAULTS, **(conf or {})}
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
